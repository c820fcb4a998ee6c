package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"time"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/lake"
	"github.com/cdcsync/cdcsync/merge"
)

// adminServer is the admin listener of `cdcsync run` (admin.listen): POST
// /v1/resync, POST /v1/repair, POST /v1/tag and, with admin.pprof, Go's
// profiles under /debug/pprof/. It is apart from http.listen, which a Prometheus setup may expose, and
// takes requests from programs only (cdcsync resync, curl): a request a
// web page makes is refused, so a page open in a browser on the same
// machine cannot make cdcsync copy a table.
type adminServer struct {
	srv    *http.Server
	sock   *adminSocket // nil for a TCP listener
	closed sync.Once
}

// serveAdmin starts the admin listener cfg.Admin describes; it returns nil
// when admin.listen is off. A TCP listener needs the token (config
// validation says so); a Unix socket is reachable by the daemon's user and
// root only (mode 0600) and checks the token too when one is set.
// adminAPI is what the admin endpoints ask of the running daemon.
type adminAPI interface {
	// resync copies a table afresh (cdcsync resync).
	resync(ctx context.Context, id cdcsync.TableID) error
	// repair copies chosen rows afresh and returns once they are committed
	// (cdcsync verify --repair).
	repair(ctx context.Context, id cdcsync.TableID, keys [][]any) (merge.RepairResult, error)
	// tag tags the snapshots of a cut while their tables' commits pause
	// (cdcsync cut --tag).
	tag(ctx context.Context, cut lake.Cut, name string, keep time.Duration) error
}

func serveAdmin(cfg *config.Config, api adminAPI, log *slog.Logger) (*adminServer, error) {
	a := &cfg.Admin
	if a.Network() == "" {
		if a.Listen == "" {
			return nil, exitError{2, errors.New("admin.listen is empty: set it to a Unix socket path, host:port with a token, or off")}
		}
		return nil, nil
	}
	token, err := a.ResolveToken()
	if err != nil {
		return nil, exitError{2, err}
	}
	s := &adminServer{srv: &http.Server{Handler: adminHandler(token, a.PProf, api, log), ReadHeaderTimeout: 10 * time.Second}}
	var ln net.Listener
	if a.Network() == "unix" {
		s.sock, err = listenAdminSocket(a.Listen, a.DefaultSocket(), cfg.Pipeline, log)
		if err != nil {
			return nil, err
		}
		ln = s.sock.listener()
		s.sock.start(s.serve)
	} else {
		if ln, err = net.Listen("tcp", a.Listen); err != nil {
			return nil, fmt.Errorf("listen on %s for admin requests: %w; change admin.listen, or set it to off", a.Listen, err)
		}
		s.serve(ln)
	}
	log.Info("serving admin requests", "address", ln.Addr().String(), "token", token != "", "pprof", a.PProf)
	return s, nil
}

func (s *adminServer) serve(ln net.Listener) {
	go func() {
		// Serve returns when the listener closes: at shutdown, or when a
		// replaced socket's listener is closed.
		_ = s.srv.Serve(ln)
	}()
}

// Close stops the listener and removes the socket file; it may be called
// again, and on a nil server (admin.listen: off).
func (s *adminServer) Close() {
	if s == nil {
		return
	}
	s.closed.Do(func() {
		// The socket first: it stops making the socket again.
		if s.sock != nil {
			s.sock.close()
		}
		s.srv.Close()
	})
}

// adminHandler serves the admin endpoints behind adminGuard.
func adminHandler(token string, pprofOn bool, api adminAPI, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
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
		if err := api.resync(r.Context(), id); err != nil {
			code := http.StatusConflict
			if errors.Is(err, errNotRunning) {
				code = http.StatusServiceUnavailable
			}
			http.Error(w, err.Error(), code)
			return
		}
		log.Info("resync requested on the admin listener", "table", id.String())
		fmt.Fprintf(w, "copying %s afresh; follow cdcsync_copy_rows{table=%q} in /metrics or the daemon's log\n", id, id.String())
	})
	mux.HandleFunc("/v1/repair", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "use POST /v1/repair?table=DB.TABLE with {\"keys\": [...]}", http.StatusMethodNotAllowed)
			return
		}
		id, err := parseTableID(r.URL.Query().Get("table"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		keys, err := decodeRepairRequest(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		res, err := api.repair(r.Context(), id, keys)
		if err != nil {
			code := http.StatusConflict
			if errors.Is(err, errNotRunning) {
				code = http.StatusServiceUnavailable
			}
			http.Error(w, err.Error(), code)
			return
		}
		log.Info("repair requested on the admin listener", "table", id.String(), "keys", len(keys),
			"upserted", res.Upserted, "deleted", res.Deleted, "skipped", res.Skipped, "epoch", res.Epoch)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(repairAnswer(res))
	})
	mux.HandleFunc("/v1/tag", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, `use POST /v1/tag with {"tag": NAME, "keep": DURATION, "tables": [...]}`, http.StatusMethodNotAllowed)
			return
		}
		req, cut, keep, err := decodeTagRequest(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := api.tag(r.Context(), cut, req.Tag, keep); err != nil {
			code := http.StatusConflict
			if errors.Is(err, errNotRunning) {
				code = http.StatusServiceUnavailable
			}
			http.Error(w, err.Error(), code)
			return
		}
		log.Info("cut tagged on request of the admin listener", "tag", req.Tag, "tables", len(cut.Tables), "keep", keep)
		fmt.Fprintf(w, "tagged %d tables %q\n", len(cut.Tables), req.Tag)
	})
	if pprofOn {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	} else {
		mux.HandleFunc("/debug/pprof/", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "the profiler is off: set admin.pprof: true and restart cdcsync", http.StatusNotFound)
		})
	}
	g := &adminGuard{next: mux, log: log}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		g.tokenSum = sum[:]
	}
	return g
}

// adminGuard refuses what the admin endpoints must not serve: requests a
// web page makes (cross-site request forgery) and, when a token is set,
// requests without it.
type adminGuard struct {
	next     http.Handler
	tokenSum []byte // SHA-256 of the token; nil when none is required
	log      *slog.Logger
}

func (g *adminGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if code, why := browserRequest(r); code != 0 {
		g.log.Warn("admin request refused", "method", r.Method, "path", r.URL.Path, "reason", why)
		http.Error(w, "refused: "+why, code)
		return
	}
	if g.tokenSum != nil && !g.validToken(r) {
		g.log.Warn("admin request refused", "method", r.Method, "path", r.URL.Path, "reason", "no valid token")
		w.Header().Set("WWW-Authenticate", `Bearer realm="cdcsync admin"`)
		http.Error(w, "refused: send the admin token as \"Authorization: Bearer TOKEN\" (admin.token or admin.token_file of the daemon's configuration)", http.StatusUnauthorized)
		return
	}
	g.next.ServeHTTP(w, r)
}

// validToken compares the bearer token with the configured one in constant
// time (both hashed first, so that not even the length shows).
func (g *adminGuard) validToken(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], g.tokenSum) == 1 && ok
}

// browserRequest returns an HTTP status and the reason when r comes from
// a web page rather than a program, 0 otherwise. Browsers mark what a page
// sends: every request other than GET and HEAD carries Origin, and current
// browsers add Sec-Fetch-Site to every request. A program such as
// `cdcsync resync` or curl sends neither. So a request that changes
// something is refused when it carries either header, or a body of a type
// an HTML form or a fetch without a CORS preflight can send (older
// browsers); a GET (the profiles) is refused only when it comes from
// another site (an <img> or <script> of a page), and a person may open
// /debug/pprof/ in a browser through a tunnel.
func browserRequest(r *http.Request) (int, string) {
	site := r.Header.Get("Sec-Fetch-Site")
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		if site != "" && site != "same-origin" && site != "none" {
			return http.StatusForbidden, fmt.Sprintf("a %s request from a web page (Sec-Fetch-Site: %s)", site, site)
		}
		return 0, ""
	}
	if origin := r.Header.Get("Origin"); origin != "" || site != "" {
		return http.StatusForbidden, "a request from a web page (it has an Origin or Sec-Fetch-Site header); the admin endpoints take requests from programs such as cdcsync resync or curl"
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt == "application/x-www-form-urlencoded" || mt == "multipart/form-data" || mt == "text/plain" {
			return http.StatusUnsupportedMediaType, fmt.Sprintf("a body of type %q, which web forms send; send no body (the table is in the query: ?table=DB.TABLE)", ct)
		}
	}
	return 0, ""
}
