package main

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cdcsync/cdcsync/metrics"
)

// serveHTTP serves, on http.listen, the read-only endpoints: /metrics,
// /healthz (a liveness check: the daemon has not given up) and /readyz (the
// initial copies are done, the binlog is being streamed and commits go
// through; otherwise 503 with the reason). A Prometheus setup may expose
// this address; what changes something (POST /v1/resync, /v1/repair) or reveals
// internals (Go's profiles) is on the admin listener (admin.go).
// http.listen defaults to 127.0.0.1 only.
func serveHTTP(addr string, m *metrics.Metrics, st *status, log *slog.Logger) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !st.healthy.Load() {
			http.Error(w, "failed", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := st.ready(); why != "" {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	// Where these were served before: say where they are now.
	moved := func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not served on http.listen: POST /v1/resync, POST /v1/repair, POST /v1/tag and, with admin.pprof: true, /debug/pprof/ are on the admin listener (admin.listen; cdcsync resync and verify find it by themselves)", http.StatusNotFound)
	}
	mux.HandleFunc("/v1/", moved)
	mux.HandleFunc("/debug/pprof/", moved)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		// A daemon of the same pipeline on this machine (the holder, while
		// this one is its standby) may have it: serve once it is free.
		log.Warn("http.listen is in use (by another cdcsync of this machine, or another program); this daemon serves its metrics and health checks once the address is free",
			"address", addr)
		go func() {
			for {
				time.Sleep(5 * time.Second)
				if ln, err := net.Listen("tcp", addr); err == nil {
					log.Info("serving metrics and health checks", "address", ln.Addr().String())
					_ = srv.Serve(ln) // returns at once when srv was closed meanwhile
					return
				}
			}
		}()
		return srv, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listen on %s for metrics and health checks: %w; change http.listen or set it to \"off\"", addr, err)
	}
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
