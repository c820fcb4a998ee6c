package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cdcsync/cdcsync/lake"
	"github.com/cdcsync/cdcsync/lease"
)

// holding is the pipeline's lease while this daemon holds it: sessions run
// under ctx, which ends when the lease is lost.
type holding struct {
	d      *daemon
	lk     *lake.Lake // the lease's own connection to the catalog
	adm    *adminServer
	ls     *lease.Lease
	ctx    context.Context // sessions run under it: it ends with the lease, or the daemon's context
	cancel context.CancelCauseFunc
	// The lease is renewed under its own context, which a signal does not
	// end: the last commit of a clean stop happens under a valid lease,
	// then end releases it.
	stopKeep context.CancelFunc
	kept     chan struct{} // closed when Keep has returned
	admMu    sync.Mutex
	ended    bool
}

// acquire takes the pipeline's lease, waiting as a standby while another
// daemon holds it (lease.wait), and fences the tables when the previous
// holder may still run. It starts renewing the lease at once.
func (d *daemon) acquire(ctx context.Context) (*holding, error) {
	lk, err := lake.Open(ctx, lake.OptionsFrom(d.cfg), d.log)
	if err != nil {
		return nil, err
	}
	d.m.LeaseHeld.Set(0)
	ls, err := lease.Acquire(ctx, lk.LeaseStore(), lease.Options{
		Pipeline:  d.cfg.Pipeline,
		TTL:       d.cfg.Lease.TTL.Duration,
		Wait:      d.cfg.Lease.Wait,
		Self:      d.self,
		Transient: lake.Transient,
		Log:       d.log,
		Waiting: func(rec lease.Record) {
			if rec.Holder.Instance != "" {
				d.st.setReady(fmt.Sprintf("standby: pipeline %s is held by %s since %s", d.cfg.Pipeline, rec.Holder, rec.Acquired.Format(time.RFC3339)))
			} else {
				d.st.setReady("taking the pipeline over")
			}
		},
	})
	if err != nil {
		lk.Close()
		return nil, err
	}
	h := &holding{d: d, lk: lk, ls: ls, kept: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancelCause(ctx)
	keepCtx, stopKeep := context.WithCancel(context.WithoutCancel(ctx))
	h.stopKeep = stopKeep
	go func() {
		defer close(h.kept)
		h.cancel(ls.Keep(keepCtx))
	}()
	d.m.LeaseHeld.Set(1)
	d.holding.Store(true)
	d.m.LeaseToken.Set(float64(ls.Token()))
	d.m.LeaseTakeovers.WithLabelValues(ls.How).Inc()
	if ls.Fence {
		if err := h.fence(); err != nil {
			h.end(false)
			return nil, err
		}
	}
	// Only the holder serves admin requests (a resync asks the pipeline
	// that commits); a standby on the same machine leaves the socket to it.
	if err := h.serveAdmin(); err != nil {
		var ee exitError
		if errors.As(err, &ee) && ee.code == 2 {
			h.end(false)
			return nil, err
		}
		// A previous holder on this machine that is paused still holds
		// the socket's lock: try again until it is gone.
		d.log.Warn("admin requests (cdcsync resync) cannot be served yet; retrying every 5 s", "error", err)
		go h.retryAdmin()
	}
	return h, nil
}

// serveAdmin starts the admin listener unless the holding ended.
func (h *holding) serveAdmin() error {
	h.admMu.Lock()
	defer h.admMu.Unlock()
	if h.ended {
		return nil
	}
	adm, err := serveAdmin(h.d.cfg, h.d, h.d.log)
	if err == nil {
		h.adm = adm
	}
	return err
}

func (h *holding) retryAdmin() {
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
		if h.serveAdmin() == nil {
			return
		}
	}
}

// fence stops the previous holder's commits before this daemon commits
// anything, retrying while the catalog is out.
func (h *holding) fence() error {
	backoff := time.Second
	for {
		start := time.Now()
		n, err := h.lk.Fence(h.ctx, h.ls.Token())
		if err == nil {
			h.d.log.Info("fenced the pipeline's tables against its previous holder", "tables", n, "token", h.ls.Token(),
				"previous", h.ls.Previous.Holder.String(), "took", time.Since(start).Round(time.Millisecond).String())
			return nil
		}
		if h.ctx.Err() != nil {
			return context.Cause(h.ctx)
		}
		if !lake.Transient(err) {
			return fmt.Errorf("fence the tables of pipeline %s against its previous holder %s: %w", h.d.cfg.Pipeline, h.ls.Previous.Holder, err)
		}
		h.d.log.Warn("cannot fence the pipeline's tables yet; retrying", "error", err, "in", backoff.String())
		if !sleep(h.ctx, backoff) {
			return context.Cause(h.ctx)
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// lost returns why the lease is lost when err (a session's end) or the
// lease itself says so; nil while it holds.
func (h *holding) lost(err error) error {
	if errors.Is(err, lease.ErrLost) {
		return err
	}
	if cause := context.Cause(h.ctx); h.ctx.Err() != nil && errors.Is(cause, lease.ErrLost) {
		return cause
	}
	return nil
}

// end stops renewing the lease; with release (after the last commit of a
// clean stop) it gives the lease up so that a standby takes over at once.
func (h *holding) end(release bool) {
	h.admMu.Lock()
	h.ended = true
	h.adm.Close()
	h.admMu.Unlock()
	h.cancel(context.Canceled)
	h.stopKeep()
	<-h.kept
	h.d.m.LeaseHeld.Set(0)
	h.d.holding.Store(false)
	if release && h.lost(nil) == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.ls.Release(ctx); err != nil {
			h.d.log.Warn("could not release the pipeline's lease; a standby takes over once it expires", "error", err, "ttl", h.d.cfg.Lease.TTL.Duration.String())
		} else {
			h.d.log.Info("released the pipeline's lease", "token", h.ls.Token())
		}
	}
	h.lk.Close()
}
