// Package metrics defines cdcsync's Prometheus metrics. One Metrics value is
// created per process and handed to the parts that record into it; nothing
// is registered globally.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics holds every collector cdcsync exports.
type Metrics struct {
	Registry *prometheus.Registry

	Rows            *prometheus.CounterVec // row changes read from the binlog, by table and op
	SnapshotRows    *prometheus.CounterVec // rows copied by the initial snapshot, by table
	EpochsCommitted prometheus.Counter
	TableCommits    *prometheus.CounterVec // commits by table and result
	CommitSeconds   prometheus.Histogram   // time to commit a whole epoch
	EpochRows       prometheus.Histogram
	LagSeconds      prometheus.Gauge // now minus the commit time of the last committed transaction
	LagBytes        prometheus.Gauge // server binlog position minus the committed position, same file only
	ReadLagSeconds  prometheus.Gauge // now minus the commit time of the last transaction read
	Transactions    prometheus.Counter
}

// New creates the collectors and registers them, with Go and process
// collectors, in a new registry.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cdcsync_rows_total", Help: "Row changes read from the binlog, by table and operation.",
		}, []string{"table", "op"}),
		SnapshotRows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cdcsync_snapshot_rows_total", Help: "Rows copied by the initial snapshot, by table.",
		}, []string{"table"}),
		EpochsCommitted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cdcsync_epochs_committed_total", Help: "Epochs committed to every table and checkpointed.",
		}),
		TableCommits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cdcsync_table_commits_total", Help: "Iceberg commits by table and result (ok, retry, failed).",
		}, []string{"table", "result"}),
		CommitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cdcsync_commit_duration_seconds", Help: "Time to commit one epoch to all its tables and checkpoint it.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
		EpochRows: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cdcsync_epoch_rows", Help: "Row changes per committed epoch.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 12),
		}),
		LagSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cdcsync_replication_lag_seconds", Help: "Seconds between now and the commit time in MySQL of the last transaction committed to Iceberg.",
		}),
		LagBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cdcsync_replication_lag_bytes", Help: "Binlog bytes the server has written beyond the last committed position.",
		}),
		ReadLagSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cdcsync_read_lag_seconds", Help: "Seconds between now and the commit time in MySQL of the last transaction read from the binlog.",
		}),
		Transactions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cdcsync_transactions_total", Help: "Transactions read from the binlog.",
		}),
	}
	m.Registry.MustRegister(m.Rows, m.SnapshotRows, m.EpochsCommitted, m.TableCommits, m.CommitSeconds,
		m.EpochRows, m.LagSeconds, m.LagBytes, m.ReadLagSeconds, m.Transactions,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
