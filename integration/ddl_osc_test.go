package integration

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// Online schema change tools, done by hand with the statements they issue:
// the shadow table is never mirrored, and the final swap becomes a schema
// change of the table, which keeps its rows, without a new copy.

const oscTable = `CREATE TABLE %s.t (
	id INT NOT NULL PRIMARY KEY,
	v VARCHAR(20),
	n INT NOT NULL,
	d DECIMAL(10,2)
)`

// oscDML changes db.t; apply, when set, repeats each change on the shadow
// table the way gh-ost's binlog applier does (after the fact, in its own
// transaction).
func oscDML(e *env, r *rand.Rand, next *int, apply func(id int)) {
	e.t.Helper()
	id := 0
	switch r.IntN(3) {
	case 0:
		*next++
		id = *next
		e.exec(fmt.Sprintf("INSERT INTO %s.t (id, v, n, d) VALUES (%d, 'x%d', %d, %d.5)", e.dbName, id, id, r.IntN(100), r.IntN(100)))
	case 1:
		id = 1 + r.IntN(*next)
		e.exec(fmt.Sprintf("UPDATE %s.t SET n = n + 1, v = 'u%d' WHERE id = %d", e.dbName, r.IntN(100), id))
	default:
		id = 1 + r.IntN(*next)
		e.exec(fmt.Sprintf("DELETE FROM %s.t WHERE id = %d", e.dbName, id))
	}
	if apply != nil {
		apply(id)
	}
}

// TestGhostMigration runs a gh-ost-like migration: _t_gho created LIKE t and
// altered, rows copied in chunks while DML on t flows and is applied to the
// ghost, a _t_ghc changelog, and the atomic cut-over RENAME TABLE t TO
// _t_del, _t_gho TO t. cdcsync is stopped in the middle of it, so the
// shadow's history comes back from the Iceberg table's properties.
func TestGhostMigration(t *testing.T) {
	e := newEnv(t, "it_osc_ghost", envOptions{})
	db := e.dbName
	e.exec(fmt.Sprintf(oscTable, db))
	e.insertN("t", 1, 60, "id, v, n, d", func(i int) string { return fmt.Sprintf("%d, 'v%d', %d, %d.25", i, i, i, i) })
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	before := e.captureState("t")

	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	next := 60
	cols := "id, v, n, d"
	e.exec(fmt.Sprintf("create /* gh-ost */ table `%s`.`_t_gho` like `%s`.`t`", db, db))
	e.exec(fmt.Sprintf("alter /* gh-ost */ table `%s`.`_t_gho` add column w int not null default 3, modify n bigint not null, change v label varchar(40)", db))
	e.exec(fmt.Sprintf("create /* gh-ost */ table `%s`.`_t_ghc` (id bigint auto_increment, last_update timestamp not null DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, "+
		"hint varchar(64) charset ascii not null, value varchar(4096) charset ascii not null, primary key(id), unique key hint_uidx(hint)) auto_increment=256", db))
	ghostCols := "id, label, n, d"
	applyToGhost := func(id int) {
		// gh-ost replays each binlog change on the ghost.
		e.exec(fmt.Sprintf("delete /* gh-ost */ from `%s`.`_t_gho` where id = %d", db, id))
		e.exec(fmt.Sprintf("replace /* gh-ost */ into `%s`.`_t_gho` (%s) select %s from `%s`.`t` where id = %d", db, ghostCols, cols, db, id))
	}
	copyChunk := func(lo, hi int) {
		e.exec(fmt.Sprintf("insert /* gh-ost */ ignore into `%s`.`_t_gho` (%s) (select %s from `%s`.`t` force index (`PRIMARY`) where id between %d and %d lock in share mode)",
			db, ghostCols, cols, db, lo, hi))
	}
	for lo := 1; lo <= 30; lo += 10 {
		copyChunk(lo, lo+9)
		for i := 0; i < 5; i++ {
			oscDML(e, r, &next, applyToGhost)
		}
		e.exec(fmt.Sprintf("insert /* gh-ost */ into `%s`.`_t_ghc` (id, hint, value) values (2, 'heartbeat', '%d') on duplicate key update last_update=NOW(), value=VALUES(value)", db, lo))
	}
	// cdcsync stops in the middle of the migration and lags behind the rest.
	e.waitCaughtUp(p, time.Minute)
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	for lo := 31; lo <= next+20; lo += 10 {
		copyChunk(lo, lo+9)
		for i := 0; i < 5; i++ {
			oscDML(e, r, &next, applyToGhost)
		}
	}
	copyChunk(1, next) // the copy ends after every row; gh-ost's row-copy covers the range it read at its start
	// The atomic cut-over: a sentry _t_del, then the swap.
	e.exec(fmt.Sprintf("create /* gh-ost */ table `%s`.`_t_del` (id int auto_increment primary key) engine=InnoDB comment='ghost-cut-over-sentry'", db))
	e.exec(fmt.Sprintf("drop /* gh-ost */ table if exists `%s`.`_t_del`", db))
	e.exec(fmt.Sprintf("rename /* gh-ost */ table `%s`.`t` to `%s`.`_t_del`, `%s`.`_t_gho` to `%s`.`t`", db, db, db, db))
	e.exec(fmt.Sprintf("drop /* gh-ost */ table if exists `%s`.`_t_ghc`", db))
	cols = "id, label, n, d"
	for i := 0; i < 10; i++ {
		next++
		e.exec(fmt.Sprintf("INSERT INTO %s.t (id, label, n, d, w) VALUES (%d, 'after', %d, 1.5, 9)", db, next, i))
	}
	e.exec(fmt.Sprintf("UPDATE %s.t SET w = w + 1 WHERE id %% 3 = 0", db))
	e.exec(fmt.Sprintf("drop /* gh-ost */ table if exists `%s`.`_t_del`", db))

	p = e.start()
	e.waitCaughtUp(p, 2*time.Minute)
	e.assertMirrors("t")
	e.assertColumns("t")
	e.assertOldSnapshot("t", before)
	for _, shadow := range []string{"_t_gho", "_t_ghc", "_t_del"} {
		if e.icebergTableExists(db, shadow) {
			t.Errorf("the shadow table %s is mirrored", shadow)
		}
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	if strings.Contains(p.output(), "initial copy committed") {
		t.Errorf("t was copied again; the swap must be a schema change:\n%s", p.output())
	}
	if t.Failed() {
		t.Logf("output:\n%s", p.output())
	}
}

// TestPtOscMigration runs a pt-online-schema-change-like migration: _t_new
// created from SHOW CREATE TABLE t and altered, triggers on t that write
// every change to _t_new in the same transaction, a chunked copy, and the
// swap RENAME TABLE t TO _t_old, _t_new TO t, with cdcsync running; then
// again on another table with cdcsync stopped during the whole migration.
func TestPtOscMigration(t *testing.T) {
	e := newEnv(t, "it_osc_pt", envOptions{})
	db := e.dbName
	e.exec(fmt.Sprintf(oscTable, db))
	e.exec(fmt.Sprintf(strings.Replace(oscTable, ".t (", ".u (", 1), db))
	for _, tbl := range []string{"t", "u"} {
		e.insertN(tbl, 1, 40, "id, v, n, d", func(i int) string { return fmt.Sprintf("%d, 'v%d', %d, %d.25", i, i, i, i) })
	}
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))

	migrate := func(tbl string, next *int, during func()) {
		res, err := e.server.Query(fmt.Sprintf("SHOW CREATE TABLE `%s`.`%s`", db, tbl))
		if err != nil {
			t.Fatal(err)
		}
		ddl, _ := res.GetString(0, 1)
		shadow := "_" + tbl + "_new"
		ddl = strings.Replace(ddl, "CREATE TABLE `"+tbl+"`", "CREATE TABLE `"+db+"`.`"+shadow+"`", 1)
		e.exec(ddl)
		e.exec(fmt.Sprintf("ALTER TABLE `%s`.`%s` ADD COLUMN note VARCHAR(10) NOT NULL DEFAULT 'n/a', MODIFY d DECIMAL(14,2)", db, shadow))
		cols := "`id`, `v`, `n`, `d`"
		newCols := "NEW.`id`, NEW.`v`, NEW.`n`, NEW.`d`"
		e.exec(fmt.Sprintf("CREATE TRIGGER `%s`.`pt_osc_%s_%s_del` AFTER DELETE ON `%s`.`%s` FOR EACH ROW DELETE IGNORE FROM `%s`.`%s` WHERE `%s`.`%s`.`id` <=> OLD.`id`",
			db, db, tbl, db, tbl, db, shadow, db, shadow))
		e.exec(fmt.Sprintf("CREATE TRIGGER `%s`.`pt_osc_%s_%s_upd` AFTER UPDATE ON `%s`.`%s` FOR EACH ROW BEGIN DELETE IGNORE FROM `%s`.`%s` WHERE !(OLD.`id` <=> NEW.`id`) AND `%s`.`%s`.`id` <=> OLD.`id`; "+
			"REPLACE INTO `%s`.`%s` (%s) VALUES (%s); END", db, db, tbl, db, tbl, db, shadow, db, shadow, db, shadow, cols, newCols))
		e.exec(fmt.Sprintf("CREATE TRIGGER `%s`.`pt_osc_%s_%s_ins` AFTER INSERT ON `%s`.`%s` FOR EACH ROW REPLACE INTO `%s`.`%s` (%s) VALUES (%s)",
			db, db, tbl, db, tbl, db, shadow, cols, newCols))
		for lo := 1; lo <= *next; lo += 15 {
			e.exec(fmt.Sprintf("INSERT LOW_PRIORITY IGNORE INTO `%s`.`%s` (%s) SELECT %s FROM `%s`.`%s` FORCE INDEX(`PRIMARY`) WHERE ((`id` >= %d)) AND ((`id` <= %d)) LOCK IN SHARE MODE",
				db, shadow, cols, cols, db, tbl, lo, lo+14))
			during()
		}
		e.exec(fmt.Sprintf("ANALYZE TABLE `%s`.`%s`", db, shadow))
		e.exec(fmt.Sprintf("RENAME TABLE `%s`.`%s` TO `%s`.`_%s_old`, `%s`.`%s` TO `%s`.`%s`", db, tbl, db, tbl, db, shadow, db, tbl))
		e.exec(fmt.Sprintf("DROP TABLE IF EXISTS `%s`.`_%s_old`", db, tbl))
		for _, k := range []string{"del", "upd", "ins"} {
			e.exec(fmt.Sprintf("DROP TRIGGER IF EXISTS `%s`.`pt_osc_%s_%s_%s`", db, db, tbl, k))
		}
	}

	next := 40
	before := e.captureState("t")
	migrate("t", &next, func() {
		for i := 0; i < 4; i++ {
			oscDML(e, r, &next, nil)
		}
	})
	e.exec(fmt.Sprintf("INSERT INTO %s.t (id, v, n, d, note) VALUES (1000, 'after', 1, 99.99, 'new')", db))
	e.waitCaughtUp(p, 2*time.Minute)
	e.assertMirrors("t")
	e.assertColumns("t")
	e.assertOldSnapshot("t", before)
	if e.icebergTableExists(db, "_t_new") || e.icebergTableExists(db, "_t_old") {
		t.Errorf("a shadow table is mirrored")
	}

	// The same for u while cdcsync is stopped: on restart it lags behind the
	// whole migration.
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	nextU := 40
	migrate("u", &nextU, func() {
		e.exec(fmt.Sprintf("UPDATE %s.u SET n = n + 1 WHERE id %% 5 = %d", db, r.IntN(5)))
		nextU++
		e.exec(fmt.Sprintf("INSERT INTO %s.u (id, v, n, d) VALUES (%d, 'x', 1, 2.5)", db, nextU))
	})
	p = e.start()
	e.waitCaughtUp(p, 2*time.Minute)
	e.assertMirrors("u")
	e.assertColumns("u")
	e.assertMirrors("t")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	if strings.Contains(p.output(), "initial copy committed") {
		t.Errorf("u was copied again; the swap must be a schema change:\n%s", p.output())
	}
	if t.Failed() {
		t.Logf("output:\n%s", p.output())
	}
}
