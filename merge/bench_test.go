package merge

// Benchmarks of the epoch buffer on the bench harness's row shape (15
// columns, ~200 bytes, bigint primary key; see bench/schema.go): 1M row
// changes (70% updates, 15% inserts, 15% deletes over a 1M-key table, in
// transactions of 500 changes) folded with Buffer.Apply, then Output. The
// changes are built once, outside the timer.
//
// Run: go test ./merge/ -run '^$' -bench . -benchmem

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
)

func benchTableSchema() *cdcsync.TableSchema {
	kinds := []cdcsync.Kind{cdcsync.KindInt64, cdcsync.KindInt32, cdcsync.KindInt32, cdcsync.KindDecimal, cdcsync.KindDecimal,
		cdcsync.KindFloat64, cdcsync.KindString, cdcsync.KindString, cdcsync.KindString, cdcsync.KindString,
		cdcsync.KindTimestamp, cdcsync.KindTimestampTZ, cdcsync.KindDate, cdcsync.KindInt32, cdcsync.KindString}
	s := &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "bench", Table: "t"}, PrimaryKey: []int{0}}
	for i, k := range kinds {
		s.Columns = append(s.Columns, cdcsync.Column{Name: fmt.Sprintf("c%d", i), Kind: k, Nullable: i > 0})
	}
	return s
}

func benchRow(id int64, gen int, r *rand.Rand) cdcsync.Row {
	created := int64(1_600_000_000_000_000) + id*1_000_003
	return cdcsync.Row{
		id, int32(id % 100_000), int32(gen), fmt.Sprintf("%d.%02d", r.IntN(100_000), r.IntN(100)), "12.3400",
		r.Float64(), "paid", fmt.Sprintf("customer %08d", id), fmt.Sprintf("user%d@example.com", id),
		fmt.Sprintf("order %d note: lorem ipsum dolor sit amet %x", id, r.Uint64()),
		created, created + int64(gen), int32(id % 20000), int32(id % 128), `{"k": 1, "tags": ["a", "b"]}`,
	}
}

// benchTxns builds n row changes on a table of keys 1..keys.
func benchTxns(n, keys, perTxn int) []*cdcsync.Txn {
	r := rand.New(rand.NewPCG(1, 2))
	id := cdcsync.TableID{Database: "bench", Table: "t"}
	next := int64(keys + 1)
	var txns []*cdcsync.Txn
	var cur *cdcsync.Txn
	for i := 0; i < n; i++ {
		if cur == nil || len(cur.Changes) == perTxn {
			cur = &cdcsync.Txn{GTID: fmt.Sprintf("0-1-%d", len(txns)+1), Time: time.Unix(1_700_000_000, 0)}
			cur.Pos = binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: cur.GTID}.Position()
			txns = append(txns, cur)
		}
		var c cdcsync.Change
		switch p := r.IntN(100); {
		case p < 70:
			k := 1 + r.Int64N(int64(keys))
			c = cdcsync.Change{Table: id, Op: cdcsync.OpUpdate, Before: benchRow(k, 0, r), After: benchRow(k, i, r)}
		case p < 85:
			c = cdcsync.Change{Table: id, Op: cdcsync.OpInsert, After: benchRow(next, i, r)}
			next++
		default:
			c = cdcsync.Change{Table: id, Op: cdcsync.OpDelete, Before: benchRow(1+r.Int64N(int64(keys)), 0, r)}
		}
		cur.Changes = append(cur.Changes, c)
		cur.Bytes += 400
	}
	return txns
}

func benchApply(b *testing.B, changes int) {
	s := benchTableSchema()
	txns := benchTxns(changes, 1_000_000, 500)
	schemas := func(cdcsync.TableID) *cdcsync.TableSchema { return s }
	var ms, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuNow()
	var outRows int
	for i := 0; i < b.N; i++ {
		buf := NewBuffer(schemas, nil)
		for _, t := range txns {
			if err := buf.Apply(t, func(cdcsync.TableID) bool { return false }); err != nil {
				b.Fatal(err)
			}
		}
		deletes, rows := buf.Output(s.ID)
		outRows = len(deletes) + len(rows)
	}
	elapsed, cpu := time.Since(start), cpuNow()-cpu0
	b.StopTimer()
	runtime.ReadMemStats(&after)
	n := float64(b.N) * float64(changes)
	b.ReportMetric(float64(elapsed.Nanoseconds())/n, "ns/change")
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/change")
	b.ReportMetric(float64(after.TotalAlloc-ms.TotalAlloc)/n, "B/change")
	b.ReportMetric(float64(after.Mallocs-ms.Mallocs)/n, "allocs/change")
	_ = outRows
}

// BenchmarkBufferApply1M folds 1M row changes into one epoch and outputs it.
func BenchmarkBufferApply1M(b *testing.B) { benchApply(b, 1_000_000) }

// BenchmarkBufferApply200k is one default-sized epoch (epoch.max_rows).
func BenchmarkBufferApply200k(b *testing.B) { benchApply(b, 200_000) }

// refBuffer is the epoch buffer as it was before the indexed entries of
// buffer.go (map[string]*entry plus a key order), kept as the oracle of
// TestBufferMatchesReference.
type refBuffer struct {
	tb      *tableBuffer // for key()
	entries map[string]*entry
	order   []string
}

func (r *refBuffer) touch(k string, first cdcsync.Row) *entry {
	e := r.entries[k]
	if e == nil {
		e = &entry{first: first}
		r.entries[k] = e
		r.order = append(r.order, k)
	}
	return e
}

func (r *refBuffer) apply(c *cdcsync.Change) {
	switch c.Op {
	case cdcsync.OpInsert:
		k, _ := r.tb.key(c.After)
		r.touch(k, c.After).final = c.After
	case cdcsync.OpDelete:
		k, _ := r.tb.key(c.Before)
		r.touch(k, c.Before).final = nil
	case cdcsync.OpUpdate:
		kb, _ := r.tb.key(c.Before)
		ka, _ := r.tb.key(c.After)
		if kb == ka {
			r.touch(kb, c.Before).final = c.After
			return
		}
		r.touch(kb, c.Before).final = nil
		r.touch(ka, c.After).final = c.After
	}
}

// TestBufferMatchesReference folds random changes (key changes included)
// on an int64 key, an int32 key and a composite key, and compares the
// output and the counts with the reference buffer.
func TestBufferMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, keyKind := range []string{"int64", "int32", "composite"} {
		s := &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "d", Table: keyKind},
			Columns:    []cdcsync.Column{{Name: "k"}, {Name: "region"}, {Name: "v"}},
			PrimaryKey: []int{0}}
		if keyKind == "composite" {
			s.PrimaryKey = []int{1, 0}
		}
		row := func(k int64, v int) cdcsync.Row {
			var key any = k
			if keyKind == "int32" {
				key = int32(k)
			}
			return cdcsync.Row{key, fmt.Sprintf("r%d", k%3), v}
		}
		b := NewBuffer(func(cdcsync.TableID) *cdcsync.TableSchema { return s }, nil)
		ref := &refBuffer{tb: newTableBuffer(s, nil), entries: map[string]*entry{}}
		counts := map[cdcsync.Op]int{}
		for i := 0; i < 20000; i++ {
			k := r.Int64N(500)
			var c cdcsync.Change
			switch r.IntN(4) {
			case 0:
				c = cdcsync.Change{Table: s.ID, Op: cdcsync.OpInsert, After: row(k, i)}
			case 1:
				c = cdcsync.Change{Table: s.ID, Op: cdcsync.OpDelete, Before: row(k, i)}
			case 2:
				c = cdcsync.Change{Table: s.ID, Op: cdcsync.OpUpdate, Before: row(k, i), After: row(k, i+1)}
			default:
				c = cdcsync.Change{Table: s.ID, Op: cdcsync.OpUpdate, Before: row(k, i), After: row(r.Int64N(500), i+1)}
			}
			if err := b.Apply(&cdcsync.Txn{Changes: []cdcsync.Change{c}}, nil); err != nil {
				t.Fatal(err)
			}
			ref.apply(&c)
			counts[c.Op]++
		}
		deletes, rows := b.Output(s.ID)
		var wantDel, wantRows []cdcsync.Row
		for _, k := range ref.order {
			e := ref.entries[k]
			wantDel = append(wantDel, e.first)
			if e.final != nil {
				wantRows = append(wantRows, e.final)
			}
		}
		if fmt.Sprint(deletes) != fmt.Sprint(wantDel) || fmt.Sprint(rows) != fmt.Sprint(wantRows) {
			t.Errorf("%s key: output differs from the reference buffer", keyKind)
		}
		if fmt.Sprint(b.Changes(s.ID)) != fmt.Sprint(counts) {
			t.Errorf("%s key: changes %v, want %v", keyKind, b.Changes(s.ID), counts)
		}
	}
}

// cpuNow is the process's user+system CPU time. The benchmarks report CPU
// time per unit next to wall time: on a shared 2-core machine wall time
// swings with the load, CPU time much less.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
