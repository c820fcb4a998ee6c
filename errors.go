package cdcsync

import "errors"

// ErrRestart is wrapped by an error that asks for a new session: what
// caused it was applied (a table marked to be copied again, foreign keys
// to be read again), and the next session starts from there.
var ErrRestart = errors.New("the session restarts")

// ErrPositionLost means the source no longer has what a table needs to be
// streamed from its committed position (the binlog was purged, or a
// failover went to a server without it): no reconnect cures it.
var ErrPositionLost = errors.New("the binlog position cdcsync needs is no longer on the server")

// ErrInterrupted is wrapped by the error of a commit that gave up work a
// shutdown must not wait for (rebuilding a table's key index reads the
// whole table): nothing of that table's share of the epoch is committed,
// and it is read again after a restart.
var ErrInterrupted = errors.New("the commit was interrupted by the shutdown")

// permanentError marks a failure that retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err so that the pipeline stops instead of retrying (two
// writers, bad credentials, a missing bucket).
func Permanent(err error) error { return permanentError{err} }

// IsPermanent reports whether err was marked by Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// stopTableError marks a commit failure that concerns one table's data
// only (a value the lake cannot hold): retrying cannot fix it, and the
// other tables need not share its fate.
type stopTableError struct{ err error }

func (e stopTableError) Error() string { return e.err.Error() }
func (e stopTableError) Unwrap() error { return e.err }

// StopTable marks err, returned by a table's commit, so that the pipeline
// stops that table (a ChangeStop at the position before the epoch) and
// commits the epoch for the others.
func StopTable(err error) error { return stopTableError{err} }

// IsStopTable reports whether err was marked by StopTable.
func IsStopTable(err error) bool {
	var s stopTableError
	return errors.As(err, &s)
}
