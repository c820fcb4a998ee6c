package ddlparse

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cdcsync/cdcsync/capture/binlogpos"
)

// The golden test: every statement of the corpus (ddlCorpus,
// ddlBinlogCorpus, goldenExtra) goes through Parse, and what comes out is
// compared with testdata/parse.golden: the same Stmt, or an error (whose
// wording may change). go test -run TestParseGolden -update rewrites the
// file.
//
// The Stmt is compared as describeStmt renders comparableStmt's version of
// it, with the SpecNoop clauses kept (as their Op only): ColumnDef.typeText
// and AlterSpec.Text are for messages (the text of a data change is
// compared ignoring case, blanks, backquotes and empty argument lists, as
// is ColumnDef.DefaultExpr).

var update = flag.Bool("update", false, "rewrite testdata/parse.golden")

const goldenFile = "testdata/parse.golden"

// goldenExtra are statements beyond the corpus that pin down the MariaDB
// and MySQL constructs the TiDB parser does not take as they are.
var goldenExtra = []ddlCase{
	{src: "hand_test.go", q: "ALTER ONLINE TABLE t ADD COLUMN c INET6", flavor: binlogpos.FlavorMariaDB},
	{src: "hand_test.go", q: "CREATE DATABASE x", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN a INET4 NOT NULL, ADD COLUMN b INET6 DEFAULT '::1', MODIFY c UUID", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN `inet6` INT DEFAULT 'INET6' COMMENT 'uuid'", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "CREATE OR REPLACE TABLE db2.t (id INT PRIMARY KEY, u UUID NOT NULL, n NCHAR(3), v NATIONAL CHARACTER VARYING(4))", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "CREATE OR REPLACE TEMPORARY TABLE t (id INT)", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "CREATE TABLE t (a NVARCHAR(5), b NCHAR VARCHAR(6), c NATIONAL CHAR(2), d CHAR(3) CHARACTER SET utf8mb3 COLLATE utf8mb3_bin)", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "CREATE TABLE t (id SERIAL DEFAULT VALUE, y YEAR(4), b BIT, c BIT(3) DEFAULT b'101')", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "CREATE TABLE t (id INT PRIMARY KEY) CHARSET utf8mb3 COLLATE utf8mb3_general_ci", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb3, DEFAULT CHARSET = swe7", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t DEFAULT CHARACTER SET big5 COLLATE big5_chinese_ci", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN c TEXT CHARACTER SET swe7 COLLATE swe7_bin NOT NULL", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN c CHAR(2) CHARACTER SET binary, ADD d TEXT CHARSET binary", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN c INT DEFAULT 1e3, ADD d DOUBLE DEFAULT 0.5, ADD e INT DEFAULT 007, ADD f DOUBLE DEFAULT -2.5E-3", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN c INT /*M!100301 INVISIBLE */, ADD d INT /*!50700 NOT NULL */", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN c INT /*M!100301 INVISIBLE */", flavor: binlogpos.FlavorMySQL},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN c INT /*T![clustered_index] NOT NULL */", flavor: binlogpos.FlavorMySQL},
	{src: "extra", q: "ALTER TABLE IF EXISTS db2.t NOWAIT ADD COLUMN IF NOT EXISTS c INT, DROP COLUMN IF EXISTS d, MODIFY COLUMN IF EXISTS e BIGINT, CHANGE COLUMN IF EXISTS f g INT AFTER c", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t DROP FOREIGN KEY IF EXISTS a, DROP CONSTRAINT IF EXISTS b, DROP CONSTRAINT c, DROP CHECK d", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN g VARCHAR(10) AS (CONCAT(a, 'x')) PERSISTENT, ADD h INT GENERATED ALWAYS AS (a) VIRTUAL INVISIBLE", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN c DATETIME DEFAULT (NOW()), ADD d INT DEFAULT (1), ADD e VARCHAR(5) DEFAULT ('x')", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t ADD c DATE DEFAULT DATE '2024-01-02', ADD d TIMESTAMP DEFAULT TIMESTAMP '2024-01-02 03:04:05'", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN p POINT NOT NULL, ADD g GEOMETRYCOLLECTION, ADD m MULTIPOLYGON SRID 0", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "RENAME TABLES a TO b, c TO d", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "RENAME TABLE IF EXISTS a WAIT 2 TO b, c NOWAIT TO d", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "DROP TABLE IF EXISTS a, b NOWAIT", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "DROP TEMPORARY TABLE a WAIT 10", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "TRUNCATE t NOWAIT", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "CREATE TABLE t (id INT PRIMARY KEY, s TIMESTAMP(6) GENERATED ALWAYS AS ROW START, e TIMESTAMP(6) GENERATED ALWAYS AS ROW END, PERIOD FOR SYSTEM_TIME(s, e)) WITH SYSTEM VERSIONING", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t DROP SYSTEM VERSIONING", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN c INT WITHOUT SYSTEM VERSIONING", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE \"t\" ADD COLUMN \"inet6\" INET6 DEFAULT 'NOWAIT'", flavor: binlogpos.FlavorMariaDB, mode: SQLMode{known: true, ansiQuotes: true, Strict: true}},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN c VARCHAR(10) DEFAULT 'a\\'INET6'", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN c VARCHAR(10) DEFAULT 'a\\' ADD d INET6", flavor: binlogpos.FlavorMariaDB, mode: SQLMode{known: true, noBackslash: true, Strict: true}},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN c INET6 FROBNICATE", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t WAIT ADD COLUMN c INT", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN c UUID FIRST, ADD d INET4 AFTER c", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t ADD (a INET6, b SERIAL, c YEAR NOT NULL)", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN c INT INVISIBLE", flavor: binlogpos.FlavorMySQL},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN c INT VISIBLE", flavor: binlogpos.FlavorMySQL},
	{src: "extra", q: "ALTER TABLE t ADD COLUMN c VARCHAR(10) CHARACTER SET utf8mb3 DEFAULT _utf8mb3'x'", flavor: binlogpos.FlavorMariaDB},
	{src: "capture/ddl_test.go", q: "CREATE DEFINER=`root`@`localhost` TRIGGER `pt_osc_db_t_ins` AFTER INSERT ON `db`.`t` FOR EACH ROW REPLACE INTO `db`.`_t_new` (`id`) VALUES (NEW.`id`)", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "CREATE PROCEDURE p() BEGIN SELECT 1; END", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "ALTER EVENT e DISABLE", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "DROP TRIGGER IF EXISTS tr", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "GRANT SELECT ON db.* TO u", flavor: binlogpos.FlavorMariaDB},
	{src: "extra", q: "OPTIMIZE TABLE t", flavor: binlogpos.FlavorMariaDB},
}

func goldenCases() []ddlCase {
	return append(append(append([]ddlCase(nil), ddlCorpus...), ddlBinlogCorpus...), goldenExtra...)
}

// goldenStmt renders a Stmt as the golden file holds it.
func goldenStmt(st *Stmt) string {
	c := comparableStmt(st)
	if c == nil {
		return "<nil>\n"
	}
	c.Specs = nil
	j := 0
	for _, sp := range st.Specs {
		if sp.Op == SpecNoop {
			c.Specs = append(c.Specs, AlterSpec{Op: SpecNoop})
			continue
		}
		c.Specs = append(c.Specs, comparableStmt(st).Specs[j])
		j++
	}
	return describeStmt(c)
}

func goldenEntry(c ddlCase) string {
	mode := c.mode
	if !mode.known {
		mode.Strict = true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "=== %s flavor=%s mode=%+v\n%q\n", c.src, c.flavor, mode, c.q)
	st, err := Parse(c.q, "db", c.flavor, mode)
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", strings.ReplaceAll(err.Error(), "\n", " "))
	} else {
		b.WriteString(goldenStmt(st))
	}
	return b.String()
}

func TestParseGolden(t *testing.T) {
	var got []string
	for _, c := range goldenCases() {
		got = append(got, goldenEntry(c))
	}
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenFile, []byte(strings.Join(got, "")), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.SplitAfter(string(data), "\n=== ")
	for i := range want {
		if i > 0 {
			want[i] = "=== " + want[i]
		}
		want[i] = strings.TrimSuffix(want[i], "=== ")
	}
	if len(want) != len(got) {
		t.Fatalf("%d statements, the golden file has %d", len(got), len(want))
	}
	errs := 0
	for i := range got {
		g, w := got[i], want[i]
		gErr, wErr := isErrEntry(g), isErrEntry(w)
		switch {
		case gErr && wErr:
			continue // the wording may change
		case gErr != wErr || g != w:
			errs++
			t.Errorf("statement %d differs:\n%s", i, lineDiff(w, g))
		}
	}
	if errs > 0 {
		t.Logf("%d of %d statements differ (want: the golden file, got: Parse)", errs, len(got))
	}
}

func isErrEntry(e string) bool {
	lines := strings.Split(strings.TrimSuffix(e, "\n"), "\n")
	return strings.HasPrefix(lines[len(lines)-1], "error: ")
}
