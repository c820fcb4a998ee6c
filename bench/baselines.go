package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/cdcsync/cdcsync/capture"
	"github.com/cdcsync/cdcsync/integration/testenv"
)

// cpuSelf is this process's user+system CPU time.
func cpuSelf() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// decodeResult is a decode baseline: A, P or one of the variants between.
type decodeResult struct {
	Wall       time.Duration
	CPU        time.Duration
	RowChanges int64
	Events     int64
	Bytes      int64 // binlog bytes read
}

// decodeVariant is one way of configuring go-mysql's BinlogSyncer for a
// decode baseline.
type decodeVariant struct {
	Name string
	Desc string
	cfg  func(replication.BinlogSyncerConfig) replication.BinlogSyncerConfig
}

// decodeA is baseline A: the syncer configured like capture/stream.go
// (capture.DecodingSyncerConfig: ParseTime off with temporals as text,
// UseDecimal, RenderJSONAsMySQLText, a 256-event cache, heartbeats, no
// retries, a discarding logger).
var decodeA = decodeVariant{Name: "A", Desc: "configured like capture/stream.go", cfg: capture.DecodingSyncerConfig}

// decodePlain is baseline P, the plain decode of issue 20: the library's
// defaults for decoding (UseDecimal off: DECIMAL as a string; no
// RenderJSONAsMySQLText; the default 10,240-event cache) except ParseTime,
// which is on as in the earlier 1.7 CPU-µs measurement (its zero value is
// off: temporals as text).
var decodePlain = decodeVariant{Name: "P", Desc: "plain: library defaults, ParseTime on, UseDecimal off", cfg: func(c replication.BinlogSyncerConfig) replication.BinlogSyncerConfig {
	c.ParseTime = true
	return c
}}

// decodeSteps are the variants of --decode-variants: A with one of its
// options changed toward P at a time, and the two that change the values
// together, to find where A's extra CPU per change goes.
var decodeSteps = []decodeVariant{
	decodeAWith("A-dec", "A with UseDecimal off (DECIMAL as a string, not decimal.Decimal)",
		func(c *replication.BinlogSyncerConfig) { c.UseDecimal = false }),
	decodeAWith("A+time", "A with ParseTime on (temporals as time.Time, not text)",
		func(c *replication.BinlogSyncerConfig) { c.ParseTime = true }),
	decodeAWith("A-json", "A with RenderJSONAsMySQLText off",
		func(c *replication.BinlogSyncerConfig) { c.RenderJSONAsMySQLText = false }),
	decodeAWith("A+cache", "A with the library's default event cache (10,240 events, not 256)",
		func(c *replication.BinlogSyncerConfig) { c.EventCacheCount = 0 }),
	decodeAWith("A-dec+time", "A with UseDecimal off and ParseTime on",
		func(c *replication.BinlogSyncerConfig) { c.UseDecimal, c.ParseTime = false, true }),
}

// decodeAWith is baseline A with change applied to its configuration.
func decodeAWith(name, desc string, change func(*replication.BinlogSyncerConfig)) decodeVariant {
	return decodeVariant{Name: name, Desc: desc, cfg: func(c replication.BinlogSyncerConfig) replication.BinlogSyncerConfig {
		c = capture.DecodingSyncerConfig(c)
		change(&c)
		return c
	}}
}

// rawDecode reads the binlog from start (file/offset) with go-mysql's
// BinlogSyncer configured by v until the transaction with GTID sequence
// number target has been read, and discards the events. CPU is this
// process's getrusage around it; the harness does nothing else meanwhile.
func rawDecode(db *testenv.MariaDB, v decodeVariant, start mysql.Position, target uint64) (decodeResult, error) {
	syncer := replication.NewBinlogSyncer(v.cfg(replication.BinlogSyncerConfig{
		ServerID: 4243,
		Flavor:   "mariadb",
		Host:     db.Host,
		Port:     uint16(db.Port),
		User:     testenv.ReplUser,
		Password: testenv.ReplPassword,
		// The library's default logger prints every connection; it
		// writes nothing per event.
		Logger: slog.New(slog.DiscardHandler),
	}))
	defer syncer.Close()
	var res decodeResult
	// A collection now, so that garbage from before (the change generator's)
	// is not collected inside the timer.
	runtime.GC()
	cpu0, t0 := cpuSelf(), time.Now()
	streamer, err := syncer.StartSync(start)
	if err != nil {
		return res, fmt.Errorf("decode baseline %s: start sync at %v: %w", v.Name, start, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var cur uint64
	for {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			return res, fmt.Errorf("decode baseline %s: read the binlog: %w", v.Name, err)
		}
		res.Events++
		res.Bytes += int64(ev.Header.EventSize)
		switch e := ev.Event.(type) {
		case *replication.MariadbGTIDEvent:
			cur = e.GTID.SequenceNumber
		case *replication.RowsEvent:
			n := int64(len(e.Rows))
			if e.Type() == replication.EnumRowsEventTypeUpdate {
				n /= 2
			}
			res.RowChanges += n
		case *replication.XIDEvent:
			if cur >= target {
				res.Wall, res.CPU = time.Since(t0), cpuSelf()-cpu0
				return res, nil
			}
		}
	}
}

// bestDecode runs rawDecode twice and keeps the faster run (the first may
// read the binlog from disk, the second from the page cache).
func bestDecode(db *testenv.MariaDB, v decodeVariant, start mysql.Position, target uint64) (decodeResult, error) {
	dec, err := rawDecode(db, v, start, target)
	if err != nil {
		return dec, err
	}
	if dec2, err := rawDecode(db, v, start, target); err == nil && dec2.Wall < dec.Wall {
		dec = dec2
	}
	return dec, nil
}

// selectResult is Baseline B.
type selectResult struct {
	Rows      int64
	GoWall    time.Duration // go-mysql ExecuteSelectStreaming, rows discarded
	GoCPU     time.Duration
	CLIWall   time.Duration // mariadb --quick > /dev/null
	CLICPU    time.Duration
	CLIStatus string
}

func rawSelect(db *testenv.MariaDB) (selectResult, error) {
	var res selectResult
	conn, err := db.Connect(testenv.ReplUser, testenv.ReplPassword, "")
	if err != nil {
		return res, err
	}
	defer conn.Close()
	cpu0, t0 := cpuSelf(), time.Now()
	var r mysql.Result
	err = conn.ExecuteSelectStreaming("SELECT * FROM bench.t", &r, func(row []mysql.FieldValue) error {
		res.Rows++
		return nil
	}, nil)
	res.GoWall, res.GoCPU = time.Since(t0), cpuSelf()-cpu0
	if err != nil {
		return res, fmt.Errorf("baseline B: %w", err)
	}
	cli, err := exec.LookPath("mariadb")
	if err != nil {
		res.CLIStatus = "mariadb client not found"
		return res, nil
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return res, err
	}
	defer devnull.Close()
	cmd := exec.Command(cli, "--no-defaults", "--quick", "-h", "127.0.0.1", "-P", strconv.Itoa(db.Port),
		"-u", testenv.ReplUser, "-p"+testenv.ReplPassword, "-e", "select * from bench.t")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = devnull, &stderr
	t0 = time.Now()
	err = cmd.Run()
	res.CLIWall = time.Since(t0)
	if err != nil {
		res.CLIStatus = fmt.Sprintf("mariadb client failed: %v %s", err, stderr.String())
		return res, nil
	}
	res.CLICPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return res, nil
}

// binlogPos is SHOW MASTER STATUS.
func binlogPos(conn *client.Conn) (mysql.Position, error) {
	r, err := conn.Execute("SHOW MASTER STATUS")
	if err != nil {
		return mysql.Position{}, err
	}
	defer r.Close()
	name, _ := r.GetString(0, 0)
	pos, _ := r.GetUint(0, 1)
	return mysql.Position{Name: name, Pos: uint32(pos)}, nil
}

func gtidBinlogPos(conn *client.Conn) (string, error) {
	r, err := conn.Execute("SELECT @@gtid_binlog_pos")
	if err != nil {
		return "", err
	}
	defer r.Close()
	s, err := r.GetString(0, 0)
	return string([]byte(s)), err
}
