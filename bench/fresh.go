package main

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/cdcsync/cdcsync/integration/testenv"
)

// loadResult is what the paced load generator did.
type loadResult struct {
	Txns     []txnRecord
	Rows     int64
	Elapsed  time.Duration
	Late     int // transactions that started more than 100 ms after their slot
	Failures int
}

// pacedLoad runs small autocommit transactions of txnRows row changes each
// (80% updates, 10% inserts, 10% deletes) at rate row changes per second for
// duration, over workers connections. Transaction i is due at
// start + i*txnRows/rate; a worker that is behind starts it at once. After
// each COMMIT the worker reads @@last_gtid on the same session.
func pacedLoad(db *testenv.MariaDB, maxID int64, rate, txnRows, workers int, duration time.Duration) (loadResult, error) {
	var res loadResult
	period := time.Duration(float64(time.Second) * float64(txnRows) / float64(rate))
	total := int(duration / period)
	conns := make([]*client.Conn, workers)
	for i := range conns {
		c, err := db.Connect(testenv.RootUser, "", "")
		if err != nil {
			return res, err
		}
		defer c.Close()
		conns[i] = c
	}
	var mu sync.Mutex
	var ins int64 = maxID + 10_000_000 // fresh ids, far above the catch-up's
	next := make(chan int)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(conn *client.Conn, seed uint64) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 99))
			for i := range next {
				due := start.Add(time.Duration(i) * period)
				if d := time.Until(due); d > 0 {
					time.Sleep(d)
				} else if d < -100*time.Millisecond {
					mu.Lock()
					res.Late++
					mu.Unlock()
				}
				var q string
				switch p := r.IntN(100); {
				case p < 80:
					a := 1 + r.Int64N(maxID-int64(txnRows))
					q = updateRows(a, int64(txnRows), i)
				case p < 90:
					mu.Lock()
					off := ins
					ins += int64(txnRows)
					mu.Unlock()
					q = insertRows(off, int64(txnRows))
				default:
					a := 1 + r.Int64N(maxID-int64(txnRows))
					q = deleteRows(a, int64(txnRows))
				}
				rr, err := conn.Execute(q)
				if err != nil {
					errs <- fmt.Errorf("load: %w", err)
					return
				}
				now := time.Now()
				n := int64(rr.AffectedRows)
				rr.Close()
				if n == 0 {
					continue
				}
				seq, err := lastGTID(conn)
				if err != nil {
					errs <- fmt.Errorf("load: %w", err)
					return
				}
				mu.Lock()
				res.Txns = append(res.Txns, txnRecord{seq: seq, commit: now, rows: n})
				res.Rows += n
				mu.Unlock()
			}
		}(conns[w], uint64(w+1))
	}
	var err error
feed:
	for i := 0; i < total; i++ {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	res.Elapsed = time.Since(start)
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	sort.Slice(res.Txns, func(i, j int) bool { return res.Txns[i].seq < res.Txns[j].seq })
	return res, err
}

// freshness returns, for each transaction, the time from its COMMIT in
// MariaDB to the first Iceberg snapshot whose position covers it; -1 when
// no snapshot covers it.
func freshness(txns []txnRecord, commits []snapshotCommit) []time.Duration {
	out := make([]time.Duration, 0, len(txns))
	for _, t := range txns {
		f := time.Duration(-1)
		for _, c := range commits {
			if c.seq >= t.seq {
				f = c.at.Sub(t.commit)
				break
			}
		}
		out = append(out, f)
	}
	return out
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}
