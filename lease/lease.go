// Package lease keeps one writer per pipeline. A pipeline's lease is a
// record in a Store that every daemon of the pipeline reads (the lake keeps
// it in the catalog): its holder, and a fencing token that grows with every
// new holder. The holder renews the record; a daemon that finds it held
// waits as a standby and takes it over once the holder releases it, is
// provably gone (a dead process on the same machine), or has not renewed
// it for the TTL, measured on the standby's own clock (so clocks need not
// agree). A holder that cannot renew in time gives the lease up before a
// standby may take it.
//
// The lease alone cannot stop a paused holder that wakes up in the middle
// of a commit: a new holder that took over from a holder that may still
// run fences the tables first (Lease.Fence), and every commit carries the
// token, so the old holder's commits fail.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Record is the lease as stored.
type Record struct {
	Holder   Holder    `json:"holder"`
	Token    int64     `json:"token"`
	Acquired time.Time `json:"acquired"`
	Renewed  time.Time `json:"renewed"` // on the holder's clock, for people
	Released bool      `json:"released,omitempty"`
}

// Store keeps a pipeline's lease record.
type Store interface {
	// Load returns the current record and its version; version is "" when
	// the pipeline has no record yet (then rec.Token is the token the new
	// holder's must exceed, normally 0).
	Load(ctx context.Context) (rec Record, version string, err error)
	// Swap replaces the record of version with rec and returns the new
	// version. It fails with ErrContended when the record is no longer at
	// version, and does nothing then.
	Swap(ctx context.Context, version string, rec Record) (string, error)
}

var (
	// ErrContended says another daemon changed the lease record first.
	ErrContended = errors.New("another daemon changed the lease record first")
	// ErrLost says this daemon no longer holds the pipeline: a newer
	// holder took it over, or it could not renew it in time. It must stop
	// committing and wait as a standby.
	ErrLost = errors.New("this daemon lost the pipeline's lease")
)

// HeldError says the pipeline is held by another daemon (when Options.Wait
// is off).
type HeldError struct {
	Pipeline string
	Record   Record
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("pipeline %s is held by %s since %s (lease token %d); lease.wait is false, so this daemon exits: "+
		"stop the other daemon (or wait for it to stop), or give this one another pipeline name",
		e.Pipeline, e.Record.Holder, e.Record.Acquired.Format(time.RFC3339), e.Record.Token)
}

// Options configure Acquire.
type Options struct {
	Pipeline string
	TTL      time.Duration
	// Wait makes Acquire wait while another daemon holds the pipeline;
	// else it fails with a *HeldError.
	Wait bool
	Self Holder
	// Transient says a store error is worth waiting out (an outage); once
	// the store has answered, Acquire waits such errors out.
	Transient func(error) bool
	// Waiting is called when Acquire starts waiting for a holder, and
	// with a zero Record when it stops (a status for /readyz).
	Waiting func(Record)
	Log     *slog.Logger
}

func (o *Options) poll() time.Duration {
	return min(max(o.TTL/15, 200*time.Millisecond), 2*time.Second)
}

// Lease is a held lease.
type Lease struct {
	store   Store
	opts    Options
	rec     Record // rec and version belong to Keep, then Release
	version string
	mu      sync.Mutex
	renewed time.Time // when the last successful swap started (monotonic); under mu
	// Previous is the record this daemon took the lease over from; zero
	// when the pipeline had none.
	Previous Record
	// Fence says the previous holder may still run: the new holder must
	// fence the tables before it commits.
	Fence bool
	// How says how the lease was taken: "new" (no holder before),
	// "released", "gone" (a dead process on this machine), "expired" (no
	// renewal for the TTL; Fence is set) or "resumed" (this daemon's own
	// lease, after the store was out).
	How string
}

// Token is the lease's fencing token.
func (l *Lease) Token() int64 { return l.rec.Token }

// Record is the lease record as this daemon last wrote it.
func (l *Lease) Record() Record { return l.rec }

// Acquire takes the pipeline's lease, waiting as a standby while another
// daemon holds it (with opts.Wait). It returns when the lease is held, ctx
// ends (ctx.Err()), the pipeline is held and opts.Wait is off (a
// *HeldError), or the store fails before it ever answered.
func Acquire(ctx context.Context, store Store, opts Options) (*Lease, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var (
		answered bool
		seen     string    // the version of the record last seen held by another
		seenAt   time.Time // when it was first seen
		expired  string    // the version last announced as expired
		waiting  bool
		outage   time.Time
	)
	defer func() {
		if waiting && opts.Waiting != nil {
			opts.Waiting(Record{})
		}
	}()
	pause := func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(opts.poll()):
			return nil
		}
	}
	for {
		rec, version, err := store.Load(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if !answered || opts.Transient == nil || !opts.Transient(err) {
				return nil, fmt.Errorf("read the lease of pipeline %s: %w", opts.Pipeline, err)
			}
			if outage.IsZero() || time.Since(outage) > time.Minute {
				log.Warn("cannot read the pipeline's lease; retrying", "pipeline", opts.Pipeline, "error", err)
				outage = time.Now()
			}
			if err := pause(); err != nil {
				return nil, err
			}
			continue
		}
		answered, outage = true, time.Time{}
		now := time.Now()
		next := Record{Holder: opts.Self, Token: rec.Token + 1, Acquired: now.UTC(), Renewed: now.UTC()}
		fence, how := false, "expired"
		switch {
		case version == "":
			// No holder yet; a store created again (after a restore)
			// returns the token to continue after.
			next.Token, how = rec.Token+1, "new"
		case rec.Holder.Instance == opts.Self.Instance:
			// Still ours (the store was out for a while): nobody took it.
			next.Token, next.Acquired, how = rec.Token, rec.Acquired, "resumed"
		case rec.Released:
			how = "released"
			log.Info("taking the pipeline over from a holder that released it", "pipeline", opts.Pipeline, "previous", rec.Holder.String())
		case rec.Holder.gone(opts.Self):
			how = "gone"
			log.Info("taking the pipeline over: its previous holder ran on this machine and is gone", "pipeline", opts.Pipeline, "previous", rec.Holder.String())
		default:
			if !opts.Wait {
				return nil, &HeldError{Pipeline: opts.Pipeline, Record: rec}
			}
			if version != seen {
				seen, seenAt = version, now
			}
			if now.Sub(seenAt) < opts.TTL {
				if !waiting {
					waiting = true
					log.Info(fmt.Sprintf("pipeline %s is held by %s since %s; waiting", opts.Pipeline, rec.Holder, rec.Acquired.Format(time.RFC3339)),
						"pipeline", opts.Pipeline, "holder", rec.Holder.String(), "token", rec.Token)
					if opts.Waiting != nil {
						opts.Waiting(rec)
					}
				}
				if err := pause(); err != nil {
					return nil, err
				}
				continue
			}
			if expired != version {
				expired = version
				log.Warn(fmt.Sprintf("pipeline %s is held by %s, which has not renewed its lease for %s; taking over and fencing its tables", opts.Pipeline, rec.Holder, opts.TTL),
					"pipeline", opts.Pipeline, "previous", rec.Holder.String(), "token", rec.Token)
			}
			fence = true
		}
		start := time.Now()
		nv, err := store.Swap(ctx, version, next)
		if errors.Is(err, ErrContended) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if opts.Transient != nil && opts.Transient(err) {
				log.Warn("cannot take the pipeline's lease yet; retrying", "pipeline", opts.Pipeline, "error", err)
				if err := pause(); err != nil {
					return nil, err
				}
				continue
			}
			return nil, fmt.Errorf("take the lease of pipeline %s: %w", opts.Pipeline, err)
		}
		l := &Lease{store: store, opts: opts, rec: next, version: nv, renewed: start, Fence: fence, How: how}
		if version != "" && rec.Holder.Instance != opts.Self.Instance {
			l.Previous = rec
		}
		log.Info("holding the pipeline", "pipeline", opts.Pipeline, "token", next.Token)
		return l, nil
	}
}

// deadline is how long after its last renewal began a holder keeps
// committing: a standby waits the whole TTL from when it saw that renewal
// land, which is later, so a third of the TTL is left as margin for clocks
// that do not run at quite the same rate.
func (l *Lease) deadline() time.Duration { return l.opts.TTL * 2 / 3 }

// Valid says whether this daemon may still commit: nil, or why not.
func (l *Lease) Valid() error {
	if d := time.Since(l.lastRenewed()); d > l.deadline() {
		return fmt.Errorf("%w: it was last renewed %s ago", ErrLost, d.Round(time.Millisecond))
	}
	return nil
}

// Keep renews the lease every third of the TTL until ctx ends (it returns
// ctx.Err()) or the lease is lost (an error wrapping ErrLost).
func (l *Lease) Keep(ctx context.Context) error {
	every := l.opts.TTL / 3
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		err := l.renew(ctx)
		switch {
		case err == nil:
			t.Reset(every)
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrLost):
			return err
		default:
			if verr := l.Valid(); verr != nil {
				return fmt.Errorf("%w; renewing failed: %v", verr, err)
			}
			if l.opts.Log != nil {
				l.opts.Log.Warn("cannot renew the pipeline's lease; retrying", "pipeline", l.opts.Pipeline, "error", err,
					"gives up in", (l.deadline() - time.Since(l.lastRenewed())).Round(time.Second).String())
			}
			t.Reset(l.opts.poll())
		}
	}
}

func (l *Lease) renew(ctx context.Context) error {
	// A renewal may take the lease's remaining validity, no more.
	ctx, cancel := context.WithTimeout(ctx, max(l.deadline()-time.Since(l.lastRenewed()), time.Second))
	defer cancel()
	start := time.Now()
	next := l.rec
	next.Renewed = start.UTC()
	nv, err := l.store.Swap(ctx, l.version, next)
	if errors.Is(err, ErrContended) {
		// An earlier renewal whose outcome was unknown (a timeout) may
		// have landed: the record is still this daemon's, at another
		// version. Renew on top of it.
		rec, v, lerr := l.store.Load(ctx)
		if lerr != nil || rec.Holder.Instance != l.rec.Holder.Instance || rec.Token != l.rec.Token || rec.Released {
			return l.lost(ctx)
		}
		l.version = v
		nv, err = l.store.Swap(ctx, v, next)
		if errors.Is(err, ErrContended) {
			return l.lost(ctx)
		}
	}
	if err != nil {
		return err
	}
	l.rec, l.version = next, nv
	l.mu.Lock()
	l.renewed = start
	l.mu.Unlock()
	return nil
}

func (l *Lease) lastRenewed() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed
}

// lost names who holds the lease now.
func (l *Lease) lost(ctx context.Context) error {
	rec, _, err := l.store.Load(ctx)
	if err != nil || rec.Holder.Instance == "" {
		return fmt.Errorf("%w: the lease record changed", ErrLost)
	}
	return fmt.Errorf("%w: %s took pipeline %s over (lease token %d)", ErrLost, rec.Holder, l.opts.Pipeline, rec.Token)
}

// Release gives the lease up so that a standby takes over at once. Call it
// after the last commit, once Keep has returned.
func (l *Lease) Release(ctx context.Context) error {
	next := l.rec
	next.Released = true
	next.Renewed = time.Now().UTC()
	_, err := l.store.Swap(ctx, l.version, next)
	if errors.Is(err, ErrContended) {
		return l.lost(ctx)
	}
	return err
}
