package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/metrics"
)

// serveHTTP serves /metrics, /healthz (a liveness check: the daemon has not
// given up), /readyz (the initial copies are done, the binlog is being
// streamed and commits go through; otherwise 503 with the reason),
// POST /v1/resync?table=DB.TABLE (copy a table afresh; `cdcsync resync`),
// POST /v1/repair?table=DB.TABLE (copy chosen rows afresh; `cdcsync verify
// --repair`) and
// Go's profiles under /debug/pprof/ (go tool pprof
// http://ADDR/debug/pprof/profile?seconds=30; the bench harness uses them,
// see docs/performance.md). http.listen defaults to 127.0.0.1 only.
func serveHTTP(addr string, m *metrics.Metrics, st *status, resync func(context.Context, cdcsync.TableID) error, repair http.Handler, log *slog.Logger) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/v1/repair", repair)
	mux.HandleFunc("/v1/resync", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "use POST /v1/resync?table=DB.TABLE", http.StatusMethodNotAllowed)
			return
		}
		id, err := parseTableID(r.URL.Query().Get("table"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := resync(r.Context(), id); err != nil {
			code := http.StatusConflict
			if errors.Is(err, errNotRunning) {
				code = http.StatusServiceUnavailable
			}
			http.Error(w, err.Error(), code)
			return
		}
		log.Info("resync requested over HTTP", "table", id.String(), "remote", r.RemoteAddr)
		fmt.Fprintf(w, "copying %s afresh; follow cdcsync_copy_rows{table=%q} in /metrics or the daemon's log\n", id, id.String())
	})
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !st.healthy.Load() {
			http.Error(w, "failed", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := st.ready(); why != "" {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s for metrics and health checks: %w; change http.listen or set it to \"off\"", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "error", err)
		}
	}()
	log.Info("serving metrics and health checks", "address", ln.Addr().String())
	return srv, nil
}

func newRand() *rand.Rand {
	return rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
}
