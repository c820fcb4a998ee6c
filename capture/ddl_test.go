package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/ddlparse"
	"github.com/cdcsync/cdcsync/config"
)

func mustCol(t *testing.T, name, dt, ct string, nullable bool) cdcsync.Column {
	t.Helper()
	c := cdcsync.Column{Name: name, DataType: dt, ColumnType: ct, Nullable: nullable}
	if err := MapColumn(&c, "utf8mb4"); err != nil {
		t.Fatal(err)
	}
	return c
}

// ddlBase is db.t (id int PK, v varchar(20), d decimal(10,2), f float).
func ddlBase(t *testing.T) *cdcsync.TableSchema {
	return &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "db", Table: "t"}, Columns: []cdcsync.Column{
		mustCol(t, "id", "int", "int(11)", false),
		mustCol(t, "v", "varchar", "varchar(20)", true),
		mustCol(t, "d", "decimal", "decimal(10,2)", true),
		mustCol(t, "f", "float", "float", true),
	}, PrimaryKey: []int{0}}
}

func alterOf(t *testing.T, s *cdcsync.TableSchema, q string, mode ddlparse.SQLMode) *alterResult {
	t.Helper()
	st, err := ddlparse.Parse(q, "db", binlogpos.FlavorMariaDB, mode)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if st.Kind != ddlparse.StmtAlter {
		t.Fatalf("%s: parsed as %d", q, st.Kind)
	}
	res, err := applyAlter(s, "", st.Specs, mode, false)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return res
}

func colNames(s *cdcsync.TableSchema) string {
	var n []string
	for _, c := range s.Columns {
		n = append(n, c.Name)
	}
	return strings.Join(n, ",")
}

func TestApplyAlterColumns(t *testing.T) {
	strict := ddlparse.SQLMode{Strict: true}
	s := ddlBase(t)

	res := alterOf(t, s, "ALTER TABLE t ADD COLUMN w INT NOT NULL DEFAULT 7 AFTER id, ADD n VARCHAR(5) FIRST", strict)
	if colNames(res.schema) != "n,id,w,v,d,f" || res.problem != "" || res.unsupported != "" {
		t.Fatalf("add: %s %q %q", colNames(res.schema), res.problem, res.unsupported)
	}
	if src := res.sources[2]; src.From != "" || src.Fill == nil || *src.Fill != "7" {
		t.Errorf("w's source: %+v", src)
	}
	if src := res.sources[0]; src.From != "" || src.Fill != nil || src.Unknown != "" {
		t.Errorf("n's source: %+v", src)
	}
	if res.schema.PrimaryKey[0] != 1 {
		t.Errorf("pk %v", res.schema.PrimaryKey)
	}
	vals, problem := fills(res.schema, res.sources)
	if problem != "" || vals[2] != int32(7) || vals[0] != nil {
		t.Errorf("fills %v %q", vals, problem)
	}

	res = alterOf(t, s, "ALTER TABLE `db`.`t` DROP COLUMN v, RENAME COLUMN d TO amount, CHANGE f f2 DOUBLE, MODIFY id BIGINT NOT NULL", strict)
	if colNames(res.schema) != "id,amount,f2" || res.problem != "" {
		t.Fatalf("drop/rename: %s %q", colNames(res.schema), res.problem)
	}
	if res.sources[1].From != "d" || res.sources[2].From != "f" || res.schema.Columns[0].Kind != cdcsync.KindInt64 {
		t.Errorf("sources %+v kinds %v", res.sources, res.schema.Columns)
	}

	for q, want := range map[string]string{
		"ALTER TABLE t MODIFY v INT":                        "Iceberg cannot promote string to int32",
		"ALTER TABLE t MODIFY d DECIMAL(12,3)":              "scale",
		"ALTER TABLE t MODIFY f DOUBLE(10,2)":               "round",
		"ALTER TABLE t ADD c DATETIME NOT NULL":             "",
		"ALTER TABLE t MODIFY v CHAR(20)":                   "trailing spaces",
		"ALTER TABLE t DROP PARTITION p1, p2":               "changes rows without writing them",
		"ALTER TABLE t MODIFY d DECIMAL(8,2)":               "",
		"ALTER TABLE t MODIFY v VARCHAR(5)":                 "",
		"ALTER TABLE t MODIFY id INT UNSIGNED NOT NULL":     "",
		"ALTER TABLE t ADD INDEX i (v), ALGORITHM=INPLACE":  "",
		"ALTER TABLE t ENGINE=InnoDB AUTO_INCREMENT=5":      "",
		"ALTER TABLE t MODIFY v TEXT CHARACTER SET utf8mb4": "",
	} {
		res := alterOf(t, s, q, strict)
		if want == "" && res.problem != "" || !strings.Contains(res.problem, want) {
			t.Errorf("%s: problem %q, want %q", q, res.problem, want)
		}
	}
	// Outside strict mode a narrowing may change values.
	if res := alterOf(t, s, "ALTER TABLE t MODIFY v VARCHAR(5)", ddlparse.SQLMode{}); !strings.Contains(res.problem, "truncated") {
		t.Errorf("non-strict narrowing: %q", res.problem)
	}
	// Fill values that cannot be known.
	for q, want := range map[string]string{
		"ALTER TABLE t ADD c TIMESTAMP DEFAULT CURRENT_TIMESTAMP":    "expression",
		"ALTER TABLE t ADD c DATETIME NOT NULL":                      "zero date",
		"ALTER TABLE t ADD c INT AUTO_INCREMENT UNIQUE":              "AUTO_INCREMENT",
		"ALTER TABLE t ADD c INT AS (id + 1) VIRTUAL":                "generated",
		"ALTER TABLE t ADD c DECIMAL(5,1) NOT NULL DEFAULT '1.25'":   "does not convert",
		"ALTER TABLE t ADD c DATETIME DEFAULT '2024-01-02 03:04:05'": "",
		"ALTER TABLE t ADD c CHAR(4) NOT NULL":                       "",
		"ALTER TABLE t ADD c BINARY(3) DEFAULT x'41'":                "",
	} {
		res := alterOf(t, s, q, strict)
		_, problem := fills(res.schema, res.sources)
		if want == "" && problem != "" || !strings.Contains(problem, want) {
			t.Errorf("%s: fill problem %q, want %q", q, problem, want)
		}
	}
	for q, want := range map[string]any{
		"ALTER TABLE t ADD c ENUM('x','y') NOT NULL":                              "x",
		"ALTER TABLE t ADD c BIT(1) NOT NULL":                                     false,
		"ALTER TABLE t ADD c BIT(1) DEFAULT b'1'":                                 true,
		"ALTER TABLE t ADD c SET('x','y') NOT NULL":                               "",
		"ALTER TABLE t ADD c TINYINT(1) DEFAULT TRUE":                             int32(1),
		"ALTER TABLE t ADD c VARCHAR(3) DEFAULT _utf8mb4'ab' COLLATE utf8mb4_bin": "ab",
	} {
		res := alterOf(t, s, q, strict)
		vals, problem := fills(res.schema, res.sources)
		if problem != "" || res.unsupported != "" || vals[4] != want {
			t.Errorf("%s: fill %v (%T), problem %q %q, want %v", q, vals, vals[4], problem, res.unsupported, want)
		}
	}
	res = alterOf(t, s, "ALTER TABLE t ADD c BINARY(3) DEFAULT x'41'", strict)
	if vals, _ := fills(res.schema, res.sources); string(vals[4].([]byte)) != "A\x00\x00" {
		t.Errorf("binary fill %q", vals[4])
	}
	// Unsupported types are reported as such.
	if res := alterOf(t, s, "ALTER TABLE t ADD e VARCHAR(5) CHARACTER SET swe7", strict); res.unsupported == "" || !strings.Contains(res.unsupported, "db.t.e") {
		t.Errorf("swe7: not reported unsupported: %q", res.unsupported)
	}
	// Primary key changes.
	res = alterOf(t, s, "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, v)", strict)
	if fmt.Sprint(res.schema.PrimaryKey) != "[0 1]" || res.schema.Columns[1].Nullable {
		t.Errorf("pk change: %v %+v", res.schema.PrimaryKey, res.schema.Columns[1])
	}
	if res := alterOf(t, s, "ALTER TABLE t DROP PRIMARY KEY", strict); len(res.schema.PrimaryKey) != 0 {
		t.Errorf("drop pk: %v", res.schema.PrimaryKey)
	}
	// Statements that do not apply.
	st, _ := ddlparse.Parse("ALTER TABLE t DROP COLUMN nope", "db", binlogpos.FlavorMariaDB, strict)
	if _, err := applyAlter(s, "", st.Specs, strict, false); !errors.Is(err, errNotUnderstood) {
		t.Errorf("drop of a missing column: %v", err)
	}
}

// TestSchemaFromStatements checks the schema of a parsed CREATE TABLE and
// a parsed column; the parsing itself is tested in package ddlparse.
func TestSchemaFromStatements(t *testing.T) {
	m := ddlparse.SQLMode{Strict: true}
	st, err := ddlparse.Parse("CREATE TABLE `_t_new` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  `v` varchar(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci DEFAULT 'x',\n"+
		"  `p` decimal(12,2) unsigned NOT NULL DEFAULT 0.00 COMMENT 'price',\n  `ts` timestamp(3) NOT NULL DEFAULT current_timestamp(3) ON UPDATE current_timestamp(3),\n"+
		"  PRIMARY KEY (`id`),\n  KEY `k` (`v`(10)),\n  CONSTRAINT `c` CHECK (`p` >= 0)\n) ENGINE=InnoDB AUTO_INCREMENT=5 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
		"db", binlogpos.FlavorMariaDB, m)
	if err != nil || st.Kind != ddlparse.StmtCreate || st.Create == nil {
		t.Fatalf("create: %+v %v", st, err)
	}
	s, _, cs, err := schemaFromCreate(st.Table, st.Create, "")
	if err != nil || cs != "utf8mb4" || colNames(s) != "id,v,p,ts" || fmt.Sprint(s.PrimaryKey) != "[0]" {
		t.Fatalf("create schema: %+v %q %v", s, cs, err)
	}
	if c := s.Columns[2]; c.Kind != cdcsync.KindDecimal || c.Precision != 12 || c.Scale != 2 || !c.Unsigned || c.Nullable {
		t.Errorf("p: %+v", c)
	}
	// MariaDB JSON is LONGTEXT.
	st, _ = ddlparse.Parse("ALTER TABLE t ADD j JSON", "db", binlogpos.FlavorMariaDB, m)
	if c, err := columnFromDef(st.Specs[0].Column, ""); err != nil || c.DataType != "longtext" || c.Kind != cdcsync.KindString {
		t.Errorf("json: %+v %v", c, err)
	}
}

// ddlReader is a reader tracking db.t, as the stream would.
func ddlReader(t *testing.T, cfgYAML string) *reader {
	cfg, err := config.Parse([]byte("source:\n  user: u\n  server_id: 5\n  include: [\"db.*\"]\n"+cfgYAML), "")
	if err != nil {
		t.Fatal(err)
	}
	r := &reader{cfg: StreamConfig{Source: &cfg.Source, DDL: cfg, Flavor: binlogpos.FlavorMariaDB,
		Start:   binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: "0-1-1"}.Position(),
		Schemas: map[cdcsync.TableID]*cdcsync.TableSchema{{Database: "db", Table: "t"}: ddlBase(t)}}}
	r.initTracking()
	return r
}

var ddlSeq = 10

func (r *reader) runDDL(t *testing.T, q string) []cdcsync.SchemaChange {
	t.Helper()
	ddlSeq++
	r.txn = &cdcsync.Txn{GTID: fmt.Sprintf("0-1-%d", ddlSeq)}
	if err := r.queryDDL(&replication.EventHeader{}, "db", q, nil); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	out := r.txn.DDL
	r.txn = nil
	return out
}

func kinds(ch []cdcsync.SchemaChange) string {
	var k []string
	for _, c := range ch {
		k = append(k, c.Table.Table+":"+c.Kind.String())
	}
	return strings.Join(k, " ")
}

func TestGhostSequence(t *testing.T) {
	r := ddlReader(t, "")
	if ch := r.runDDL(t, "create /* gh-ost */ table `db`.`_t_gho` like `db`.`t`"); kinds(ch) != "t:shadow" {
		t.Fatalf("create ghost: %s", kinds(ch))
	}
	if ch := r.runDDL(t, "alter /* gh-ost */ table `db`.`_t_gho` add column w int not null default 3, rename column v to name"); kinds(ch) != "t:shadow" {
		t.Fatalf("alter ghost: %s", kinds(ch))
	}
	if ch := r.runDDL(t, "create /* gh-ost */ table `db`.`_t_ghc` (id bigint auto_increment, primary key(id))"); len(ch) != 0 {
		t.Fatalf("changelog: %s", kinds(ch))
	}
	ch := r.runDDL(t, "rename /* gh-ost */ table `db`.`t` to `db`.`_t_del`, `db`.`_t_gho` to `db`.`t`")
	if kinds(ch) != "t:schema t:shadow" {
		t.Fatalf("swap: %s", kinds(ch))
	}
	c := ch[0]
	if colNames(c.Schema) != "id,name,d,f,w" || c.Sources[1].From != "v" || c.Sources[4].From != "" || c.Fills[4] != int32(3) || c.Schema.ID.Table != "t" {
		t.Errorf("swap change: %s %+v %v", colNames(c.Schema), c.Sources, c.Fills)
	}
	if r.restart != nil || r.tables[cdcsync.TableID{Database: "db", Table: "t"}] == nil {
		t.Errorf("after the swap: restart %v, tracked %v", r.restart, r.tables)
	}
	if ch := r.runDDL(t, "drop /* gh-ost */ table if exists `db`.`_t_del`"); len(ch) != 0 {
		t.Errorf("drop of the old table: %s", kinds(ch))
	}
}

func TestPtOscSequence(t *testing.T) {
	r := ddlReader(t, "")
	ch := r.runDDL(t, "CREATE TABLE `db`.`_t_new` (\n  `id` int(11) NOT NULL,\n  `v` varchar(20) DEFAULT NULL,\n  `d` decimal(10,2) DEFAULT NULL,\n"+
		"  `f` float DEFAULT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")
	if kinds(ch) != "t:shadow" {
		t.Fatalf("create: %s", kinds(ch))
	}
	r.runDDL(t, "ALTER TABLE `db`.`_t_new` MODIFY COLUMN d DECIMAL(14,2), ADD COLUMN note VARCHAR(10) NOT NULL DEFAULT 'n/a'")
	r.runDDL(t, "CREATE DEFINER=`root`@`localhost` TRIGGER `pt_osc_db_t_ins` AFTER INSERT ON `db`.`t` FOR EACH ROW REPLACE INTO `db`.`_t_new` (`id`) VALUES (NEW.`id`)")
	ch = r.runDDL(t, "RENAME TABLE `db`.`t` TO `db`.`_t_old`, `db`.`_t_new` TO `db`.`t`")
	if kinds(ch) != "t:schema t:shadow" {
		t.Fatalf("swap: %s", kinds(ch))
	}
	if c := ch[0]; colNames(c.Schema) != "id,v,d,f,note" || c.Schema.Columns[2].Precision != 14 || c.Fills[4] != "n/a" {
		t.Errorf("swap change: %s %+v %v", colNames(c.Schema), c.Schema.Columns[2], c.Fills)
	}
	if ch := r.runDDL(t, "DROP TABLE IF EXISTS `db`.`_t_old`"); len(ch) != 0 {
		t.Errorf("drop old: %s", kinds(ch))
	}
}

func TestRenameDropPolicies(t *testing.T) {
	r := ddlReader(t, "")
	ch := r.runDDL(t, "RENAME TABLE t TO t2")
	if kinds(ch) != "t:rename" || ch[0].NewID.Table != "t2" || r.tables[cdcsync.TableID{Database: "db", Table: "t2"}] == nil {
		t.Fatalf("rename: %s", kinds(ch))
	}
	ch = r.runDDL(t, "ALTER TABLE t2 RENAME TO other.t3")
	if kinds(ch) != "t2:drop" || r.restart != nil {
		t.Fatalf("rename out of the selection: %s %v", kinds(ch), r.restart)
	}
	// A CREATE TABLE of a dropped name restarts only under drop: drop.
	r = ddlReader(t, "ddl:\n  drop_table: drop\n")
	if ch := r.runDDL(t, "DROP TABLE t"); kinds(ch) != "t:drop" {
		t.Fatalf("drop: %s", kinds(ch))
	}
	r.txn = &cdcsync.Txn{GTID: "0-1-99"}
	if err := r.queryDDL(&replication.EventHeader{}, "db", "CREATE TABLE t (id int primary key)", nil); !errors.Is(err, ErrNewTable) {
		t.Errorf("create after drop: %v", err)
	}
	r = ddlReader(t, "")
	r.runDDL(t, "DROP TABLE t")
	if ch := r.runDDL(t, "CREATE TABLE t (id int primary key)"); len(ch) != 0 {
		t.Errorf("create after drop (keep): %s", kinds(ch))
	}
	// A table swapped in from outside is copied again (the old one, renamed
	// to a mirrored name, is followed).
	r = ddlReader(t, "")
	ch = r.runDDL(t, "RENAME TABLE t TO t_old, t_new TO t")
	if kinds(ch) != "t:rename" || !errors.Is(r.restart, ErrNewTable) {
		t.Errorf("swap with an unknown table: %s %v", kinds(ch), r.restart)
	}
}

func TestIncompatiblePolicy(t *testing.T) {
	r := ddlReader(t, "")
	ch := r.runDDL(t, "ALTER TABLE t MODIFY v INT")
	if kinds(ch) != "t:stop" || !strings.Contains(ch[0].Reason, "Iceberg cannot") {
		t.Fatalf("stop: %s %+v", kinds(ch), ch)
	}
	if r.tables[cdcsync.TableID{Database: "db", Table: "t"}] != nil {
		t.Errorf("a stopped table is still tracked")
	}
	r = ddlReader(t, "tables:\n  - match: db.t\n    ddl_incompatible: recopy\n")
	if ch := r.runDDL(t, "ALTER TABLE t MODIFY v INT"); kinds(ch) != "t:recopy" {
		t.Errorf("recopy: %s", kinds(ch))
	}
	// Unparseable statements stop the tables they name.
	r = ddlReader(t, "")
	ch = r.runDDL(t, "ALTER TABLE t FROBNICATE v")
	if kinds(ch) != "t:stop" || !strings.Contains(ch[0].Reason, "cannot parse") {
		t.Errorf("unparseable: %s %+v", kinds(ch), ch)
	}
	// Statements on other tables leave t alone.
	r = ddlReader(t, "")
	if ch := r.runDDL(t, "ALTER TABLE other FROBNICATE"); len(ch) != 0 {
		t.Errorf("other table: %s", kinds(ch))
	}
}

func TestCheckTableMap(t *testing.T) {
	s := &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "db", Table: "t"}, Columns: []cdcsync.Column{
		mustCol(t, "id", "int", "int(11)", false),
		mustCol(t, "v", "varchar", "varchar(20)", true),
		mustCol(t, "d", "decimal", "decimal(10,2)", true),
	}, PrimaryKey: []int{0}}
	tm := func() *replication.TableMapEvent {
		return &replication.TableMapEvent{ColumnCount: 3, ColumnType: []byte{3, 15, 246}, ColumnMeta: []uint16{0, 80, 10<<8 | 2},
			ColumnName: [][]byte{[]byte("id"), []byte("v"), []byte("d")}, PrimaryKey: []uint64{0}}
	}
	if err := checkTableMap(s, tm()); err != nil {
		t.Fatalf("matching table map: %v", err)
	}
	for name, mod := range map[string]func(*replication.TableMapEvent){
		"name":    func(m *replication.TableMapEvent) { m.ColumnName[1] = []byte("w") },
		"type":    func(m *replication.TableMapEvent) { m.ColumnType[1] = 3 },
		"decimal": func(m *replication.TableMapEvent) { m.ColumnMeta[2] = 12<<8 | 2 },
		"pk":      func(m *replication.TableMapEvent) { m.PrimaryKey = []uint64{0, 1} },
		"count": func(m *replication.TableMapEvent) {
			m.ColumnCount, m.ColumnType, m.ColumnMeta, m.ColumnName = 2, m.ColumnType[:2], m.ColumnMeta[:2], m.ColumnName[:2]
		},
	} {
		m := tm()
		mod(m)
		if err := checkTableMap(s, m); !errors.Is(err, ErrTableMap) {
			t.Errorf("%s: %v", name, err)
		}
		if sameTableMap(tm(), m) {
			t.Errorf("%s: sameTableMap says equal", name)
		}
	}
	if !sameTableMap(tm(), tm()) {
		t.Errorf("sameTableMap of equal maps")
	}
}
