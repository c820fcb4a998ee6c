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

	Rows         *prometheus.CounterVec // row changes read from the binlog, by table and op
	SnapshotRows *prometheus.CounterVec // rows copied by the initial snapshot, by table

	// The initial copies running now, by table.
	CopyTables       prometheus.Gauge     // tables being copied
	CopyRows         *prometheus.GaugeVec // rows copied, including earlier sessions
	CopyRowsEstimate *prometheus.GaugeVec // the server's estimate of the table's rows
	CopyRate         *prometheus.GaugeVec // rows per second this session
	CopyETA          *prometheus.GaugeVec // seconds left at that rate
	EpochsCommitted  prometheus.Counter
	EpochsCarried    *prometheus.CounterVec   // epochs a table sat out, by table (its changes carried over)
	TableCommits     *prometheus.CounterVec   // commits by table and result
	CommitSeconds    prometheus.Histogram     // time to commit a whole epoch
	CommitPhase      *prometheus.HistogramVec // where a table's epoch commit spent its time, by phase
	EpochRows        prometheus.Histogram
	LagSeconds       prometheus.Gauge // now minus the commit time of the last committed transaction
	LagBytes         prometheus.Gauge // server binlog position minus the committed position, same file only
	ReadLagSeconds   prometheus.Gauge // now minus the commit time of the last transaction read
	Transactions     prometheus.Counter
	QueuedBytes      prometheus.Gauge // decoded transactions read but not yet taken by the pipeline
	SpilledBytes     prometheus.Counter
	SourceConnected  prometheus.Gauge // 1 while the binlog stream is read
	SourceSilence    prometheus.Gauge // seconds since the stream last delivered an event or heartbeat

	// Table health and maintenance, by table. The table gauges are read from
	// the current snapshot after every commit of the table.
	TableDataFiles       *prometheus.GaugeVec   // live data files
	TableDeleteFiles     *prometheus.GaugeVec   // live delete files (equality and position)
	TableDeleteRows      *prometheus.GaugeVec   // rows in the live delete files
	TableRecords         *prometheus.GaugeVec   // rows in the live data files (before deletes)
	TableAvgFileBytes    *prometheus.GaugeVec   // average size of a live file (data and delete)
	TableSnapshots       *prometheus.GaugeVec   // snapshots in the table's metadata
	TableStagedRows      *prometheus.GaugeVec   // rows of staged data files
	KeyIndexRebuilds     *prometheus.CounterVec // key index rebuilds from the table
	KeyIndexRebuildRows  *prometheus.CounterVec // rows read by those rebuilds
	KeyIndexReplayed     *prometheus.CounterVec // snapshots replayed into the key index
	KeyIndexReplayReads  *prometheus.CounterVec // data files whose keys a replay read
	KeyIndexDiskBytes    prometheus.Gauge       // the key index database on disk
	ManifestCacheBytes   prometheus.Gauge       // manifest entries the tables keep between commits
	ManifestCacheLimit   prometheus.Gauge       // what they may keep
	CompactionLast       *prometheus.GaugeVec   // Unix time of the last compaction commit
	CompactionLastSecs   *prometheus.GaugeVec   // duration of the last compaction
	CompactionBytes      *prometheus.CounterVec // data bytes read and rewritten by compaction
	MaintenanceRuns      *prometheus.CounterVec // maintenance tasks by table, task and result
	MaintenanceSeconds   *prometheus.HistogramVec
	SnapshotsExpired     *prometheus.CounterVec
	OrphanFilesDeleted   *prometheus.CounterVec
	DeleteFilesCompacted *prometheus.CounterVec // delete files dropped by compaction

	// Schema changes.
	SchemaChanges *prometheus.CounterVec // schema changes applied, by table, kind and result
	TablesStopped prometheus.Gauge       // tables cdcsync stopped mirroring (DDL it cannot follow)
	TableStopped  *prometheus.GaugeVec   // 1 for each table cdcsync stopped mirroring, by table
	TableState    *prometheus.GaugeVec   // 1 for a table's state (copying, streaming, stopped), 0 for the others
	// TableLastCommit is the Unix time of each table's last commit.
	TableLastCommit *prometheus.GaugeVec
	// CommitsStalled counts the commits an outage of the warehouse or the
	// catalog holds up right now; Restarts the pipeline restarts by reason.
	CommitsStalled prometheus.Gauge
	Restarts       *prometheus.CounterVec

	// BuildInfo is 1, labelled with the binary's version, commit and Go.
	BuildInfo *prometheus.GaugeVec

	// The pipeline's lease: LeaseHeld is 1 while this daemon holds it
	// (0: a standby), LeaseToken its fencing token, LeaseTakeovers the
	// times this daemon took it over, by how (see lease.Acquire).
	LeaseHeld      prometheus.Gauge
	LeaseToken     prometheus.Gauge
	LeaseTakeovers *prometheus.CounterVec

	// TypePolicyValues counts the values a types: policy changed (zero
	// dates written as NULL or 1970-01-01), by table, column and policy.
	TypePolicyValues *prometheus.CounterVec
	// CascadedChanges counts the child-row changes of foreign-key actions
	// cdcsync applied itself (the binlog lacks them), by child table.
	CascadedChanges *prometheus.CounterVec
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
			Name: "cdcsync_epochs_committed_total", Help: "Epochs committed to their tables (an epoch whose slow tables were carried over into the next one counts too).",
		}),
		EpochsCarried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cdcsync_table_epochs_carried_total",
			Help: "Epochs a table sat out because it was still committing an earlier one (a slow commit); its changes were carried over into the next epoch, by table.",
		}, []string{"table"}),
		TableCommits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cdcsync_table_commits_total", Help: "Iceberg commits by table and result (ok, retry, failed).",
		}, []string{"table", "result"}),
		CommitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cdcsync_commit_duration_seconds", Help: "Time to commit one epoch to all its tables and checkpoint it.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
		CommitPhase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cdcsync_table_commit_phase_seconds",
			Help:    "Where one table's epoch commit spent its time, by phase: wait (for the table's commit lock: a compaction or a tag), lookup (key index), data and deletes (writing files), manifests, catalog, index (recording the rows in the key index).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"phase"}),
		EpochRows: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cdcsync_epoch_rows", Help: "Row changes per committed epoch.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 12),
		}),
		LagSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cdcsync_replication_lag_seconds", Help: "How far the Iceberg tables are behind MySQL: seconds since the oldest transaction read but not yet committed was committed in MySQL; when none waits, seconds since the binlog stream last delivered an event or heartbeat (so it grows while MySQL is unreachable). 0 while this daemon is a standby.",
		}),
		QueuedBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cdcsync_queued_bytes", Help: "Bytes of decoded transactions read from the binlog and waiting for the pipeline (bounded by a quarter of epoch.max_bytes; the binlog reader waits beyond).",
		}),
		SpilledBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cdcsync_spilled_bytes_total", Help: "Bytes of changes of open epochs written out before their commit, because a transaction outgrew epoch.max_bytes (see docs/architecture.md, \"Memory\").",
		}),
		SourceConnected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cdcsync_source_connected", Help: "1 while the binlog stream of the source is connected and read, else 0.",
		}),
		SourceSilence: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cdcsync_source_silence_seconds", Help: "Seconds since the binlog stream last delivered anything (an idle server sends a heartbeat every second).",
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
		SchemaChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cdcsync_schema_changes_total", Help: "Schema changes (DDL) applied to Iceberg tables, by table, kind and result.",
		}, []string{"table", "kind", "result"}),
		CommitsStalled: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cdcsync_commits_stalled", Help: "Commits (a table's epoch, the checkpoint, a schema change) being retried because the warehouse or the catalog does not answer; /readyz says since when.",
		}),
		BuildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cdcsync_build_info", Help: "1, labelled with the version, the commit (revision) and the Go version cdcsync was built with.",
		}, []string{"version", "revision", "go"}),
		LeaseHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cdcsync_lease_held", Help: "1 while this daemon holds the pipeline's lease and commits; 0 while it waits as a standby.",
		}),
		LeaseToken: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cdcsync_lease_token", Help: "Fencing token of the lease this daemon holds (grows with every new holder).",
		}),
		LeaseTakeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cdcsync_lease_acquired_total", Help: "Times this daemon took the pipeline's lease, by how: new (no holder before), released, gone (a dead process on this machine), expired (no renewal for lease.ttl; the tables were fenced), resumed (its own lease after an outage).",
		}, []string{"how"}),
		Restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cdcsync_restarts_total", Help: "Restarts of the pipeline from its committed position, by reason (source: MySQL connection lost; storage: warehouse or catalog outage; commit: commits kept failing; new_table, schema).",
		}, []string{"reason"}),
		TableStopped: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cdcsync_table_stopped", Help: "1 for a table cdcsync stopped mirroring (the log and `cdcsync tables` say why and how to resume it).",
		}, []string{"table"}),
		TableState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cdcsync_table_state", Help: "1 for the table's state as of its last commit or stop (copying, streaming, stopped), 0 for the other states.",
		}, []string{"table", "state"}),
		TableLastCommit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cdcsync_table_last_commit_timestamp_seconds", Help: "Unix time of the table's last commit by this daemon.",
		}, []string{"table"}),
		TablesStopped: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cdcsync_tables_stopped", Help: "Selected tables cdcsync stopped mirroring because of a schema change it cannot follow; the log says why and how to resume.",
		}),
		CascadedChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cdcsync_cascaded_changes_total", Help: "Child-row changes of ON DELETE/ON UPDATE CASCADE and SET NULL foreign keys, which the binlog does not record and cdcsync applied, by child table.",
		}, []string{"table"}),
		TypePolicyValues: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cdcsync_type_policy_values_total", Help: "Values Iceberg cannot hold (zero dates) that a types: policy replaced, by table, column and policy (to_null, to_epoch).",
		}, []string{"table", "column", "policy"}),
	}
	table := []string{"table"}
	m.TableDataFiles = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cdcsync_table_data_files", Help: "Live data files of the Iceberg table.",
	}, table)
	m.TableDeleteFiles = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cdcsync_table_delete_files", Help: "Live delete files (equality and position) of the Iceberg table; every read applies them.",
	}, table)
	m.TableDeleteRows = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cdcsync_table_delete_rows", Help: "Rows in the live delete files of the Iceberg table.",
	}, table)
	m.TableRecords = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cdcsync_table_data_rows", Help: "Rows in the live data files of the Iceberg table, before deletes are applied.",
	}, table)
	m.TableAvgFileBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cdcsync_table_average_file_bytes", Help: "Average size in bytes of a live file (data or delete) of the Iceberg table.",
	}, table)
	m.TableStagedRows = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cdcsync_table_staged_rows", Help: "Rows of the table's staged data files (an epoch over more than tables[].stage_above partitions stages the rows of its sparse partitions), which a partition filter cannot skip until compaction moves them: as of the last compaction, plus those staged since; deletes not subtracted.",
	}, table)
	m.TableSnapshots = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cdcsync_table_snapshots", Help: "Snapshots in the Iceberg table's metadata.",
	}, table)
	m.KeyIndexRebuilds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cdcsync_key_index_rebuilds_total", Help: "Times the key index of a position-mode table was built from the table (missing, half built, or of another lineage).",
	}, table)
	m.KeyIndexRebuildRows = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cdcsync_key_index_rebuild_rows_total", Help: "Rows whose keys the key index rebuilds read from the table.",
	}, table)
	m.KeyIndexReplayed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cdcsync_key_index_replayed_snapshots_total", Help: "Snapshots the key index caught up with by replaying them (commits it missed: a crash, compaction, another writer).",
	}, table)
	m.KeyIndexReplayReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cdcsync_key_index_replay_reads_total", Help: "Data files whose key column a key index replay read back (files another process added; cdcsync's own commits and compactions tell the index where their rows went).",
	}, table)
	m.KeyIndexDiskBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cdcsync_key_index_disk_bytes", Help: "Bytes on disk of the pipeline's key index (deletes.index_dir).",
	})
	m.ManifestCacheBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cdcsync_manifest_cache_bytes", Help: "Estimated memory of the manifest entries all tables keep between commits (delete manifests' entries, dv compaction plans).",
	})
	m.ManifestCacheLimit = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cdcsync_manifest_cache_limit_bytes", Help: "What the tables may keep of manifest entries: an eighth of memory_limit, at most 256 MiB.",
	})
	m.CompactionLast = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cdcsync_compaction_last_timestamp_seconds", Help: "Unix time of the table's last compaction commit.",
	}, table)
	m.CompactionLastSecs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cdcsync_compaction_last_duration_seconds", Help: "How long the table's last compaction took, planning to commit.",
	}, table)
	m.CompactionBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cdcsync_compaction_rewritten_bytes_total", Help: "Bytes of data files read and rewritten by compaction.",
	}, table)
	m.MaintenanceRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cdcsync_maintenance_runs_total", Help: "Maintenance tasks by table, task (compaction, expiry, orphans) and result (ok, noop, failed).",
	}, []string{"table", "task", "result"})
	m.MaintenanceSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "cdcsync_maintenance_duration_seconds", Help: "Time taken by a maintenance task, by task. Tasks run next to the epoch commits, which wait only while a compaction or a tag holds the table's commit lock (see cdcsync_table_commit_phase_seconds{phase=\"wait\"}).",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
	}, []string{"task"})
	m.SnapshotsExpired = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cdcsync_snapshots_expired_total", Help: "Snapshots removed by snapshot expiry.",
	}, table)
	m.OrphanFilesDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cdcsync_orphan_files_deleted_total", Help: "Unreferenced files removed by orphan cleanup.",
	}, table)
	m.DeleteFilesCompacted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cdcsync_compaction_removed_delete_files_total", Help: "Delete files dropped by compaction because nothing they apply to is left.",
	}, table)
	m.CopyTables = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cdcsync_copy_tables", Help: "Tables whose initial copy is running.",
	})
	m.CopyRows = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cdcsync_copy_rows", Help: "Rows the running initial copy of a table has committed, including earlier sessions.",
	}, table)
	m.CopyRowsEstimate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cdcsync_copy_rows_estimated", Help: "The source server's estimate of the rows of a table being copied.",
	}, table)
	m.CopyRate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cdcsync_copy_rows_per_second", Help: "Rows per second the running initial copy of a table reaches in this session.",
	}, table)
	m.CopyETA = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cdcsync_copy_eta_seconds", Help: "Estimated seconds until the initial copy of a table is done.",
	}, table)
	// The children whose labels are known start at 0: increase() and rate()
	// count nothing for a series that first appears at 1, so an alert on
	// the first takeover or restart of a process would never fire.
	for _, how := range []string{"new", "released", "gone", "expired", "resumed"} {
		m.LeaseTakeovers.WithLabelValues(how)
	}
	for _, reason := range []string{"source", "storage", "commit", "new_table", "schema"} {
		m.Restarts.WithLabelValues(reason)
	}
	m.Registry.MustRegister(m.CopyTables, m.CopyRows, m.CopyRowsEstimate, m.CopyRate, m.CopyETA)
	m.Registry.MustRegister(m.Rows, m.SnapshotRows, m.EpochsCommitted, m.EpochsCarried, m.TableCommits, m.CommitSeconds, m.CommitPhase,
		m.EpochRows, m.LagSeconds, m.LagBytes, m.QueuedBytes, m.SpilledBytes, m.SourceConnected, m.SourceSilence, m.ReadLagSeconds, m.Transactions, m.SchemaChanges, m.TablesStopped, m.TableStopped, m.TableState, m.TableLastCommit, m.CommitsStalled, m.Restarts, m.BuildInfo, m.LeaseHeld, m.LeaseToken, m.LeaseTakeovers, m.TypePolicyValues, m.CascadedChanges,
		m.TableDataFiles, m.TableDeleteFiles, m.TableDeleteRows, m.TableRecords, m.TableAvgFileBytes, m.TableSnapshots, m.TableStagedRows,
		m.KeyIndexRebuilds, m.KeyIndexRebuildRows, m.KeyIndexReplayed, m.KeyIndexReplayReads, m.KeyIndexDiskBytes, m.ManifestCacheBytes, m.ManifestCacheLimit,
		m.CompactionLast, m.CompactionLastSecs, m.CompactionBytes, m.MaintenanceRuns, m.MaintenanceSeconds,
		m.SnapshotsExpired, m.OrphanFilesDeleted, m.DeleteFilesCompacted,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Stopped records that cdcsync stopped mirroring table.
func (m *Metrics) Stopped(table string) {
	m.TablesStopped.Inc()
	m.TableStopped.WithLabelValues(table).Set(1)
	m.SetTableState(table, StateStopped)
}

// Table states of cdcsync_table_state.
const (
	StateCopying   = "copying"
	StateStreaming = "streaming"
	StateStopped   = "stopped"
)

// SetTableState makes state the table's one state.
func (m *Metrics) SetTableState(table, state string) {
	for _, s := range []string{StateCopying, StateStreaming, StateStopped} {
		v := 0.0
		if s == state {
			v = 1
		}
		m.TableState.WithLabelValues(table, s).Set(v)
	}
}
