package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const toxiproxyNotFound = "toxiproxy-server not found: run scripts/test.sh, which builds it into .tools/bin (or set CDCSYNC_TOXIPROXY to a toxiproxy-server binary)"

// Toxiproxy is a running Toxiproxy server (github.com/Shopify/toxiproxy,
// built at a pinned version by scripts/test.sh): TCP proxies in front of
// MySQL, MinIO or a catalog that a test cuts, blackholes or resets while
// cdcsync runs. It is driven through its HTTP API.
type Toxiproxy struct {
	API string // http://127.0.0.1:PORT
	Dir string

	proc *proc
	hc   *http.Client
}

// Proxy is one proxy of a Toxiproxy server.
type Proxy struct {
	Name   string
	Listen string // 127.0.0.1:PORT: point the client here
	t      *Toxiproxy
}

// ToxiproxyBinary returns $CDCSYNC_TOXIPROXY, else
// <repo>/.tools/bin/toxiproxy-server, else toxiproxy-server on PATH.
func ToxiproxyBinary() (string, error) {
	return toolBinary("CDCSYNC_TOXIPROXY", "toxiproxy-server", toxiproxyNotFound)
}

// StartToxiproxy starts a Toxiproxy server on a free 127.0.0.1 port.
func StartToxiproxy() (*Toxiproxy, error) {
	bin, err := ToxiproxyBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "cdcsync-toxiproxy-")
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	t := &Toxiproxy{Dir: dir, hc: &http.Client{Timeout: 10 * time.Second}}
	logPath := filepath.Join(dir, "toxiproxy.log")
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		pr, err := startProc(bin, []string{"-host", "127.0.0.1", "-port", strconv.Itoa(port)}, os.Environ(), logPath)
		if err != nil {
			return nil, err
		}
		t.API = "http://127.0.0.1:" + strconv.Itoa(port)
		deadline := time.Now().Add(startTimeout)
		for time.Now().Before(deadline) && !pr.exited() {
			if lastErr = t.call("GET", "/version", nil, nil); lastErr == nil {
				t.proc = pr
				return t, nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		pr.kill()
		if lastErr == nil {
			lastErr = fmt.Errorf("toxiproxy exited: %s", tailFile(logPath, 20))
		}
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("testenv: start toxiproxy: %w", lastErr)
}

func (t *Toxiproxy) call(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, t.API+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("toxiproxy %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// Proxy creates a proxy named name in front of upstream (host:port) on a
// free port.
func (t *Toxiproxy) Proxy(name, upstream string) (*Proxy, error) {
	var got struct {
		Listen string `json:"listen"`
	}
	err := t.call("POST", "/proxies", map[string]any{"name": name, "listen": "127.0.0.1:0", "upstream": upstream, "enabled": true}, &got)
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	return &Proxy{Name: name, Listen: got.Listen, t: t}, nil
}

// Disable closes every connection through the proxy and refuses new ones,
// like a server that is down; Enable lets them through again.
func (p *Proxy) Disable() error { return p.setEnabled(false) }

// Enable lets connections through again.
func (p *Proxy) Enable() error { return p.setEnabled(true) }

func (p *Proxy) setEnabled(on bool) error {
	return p.t.call("POST", "/proxies/"+p.Name, map[string]any{"enabled": on}, nil)
}

// Blackhole makes the proxy swallow everything the server sends back, on
// open and new connections, like a route that drops packets: clients hang
// until their own timeouts fire. Clear removes it.
func (p *Proxy) Blackhole() error {
	return p.t.call("POST", "/proxies/"+p.Name+"/toxics", map[string]any{
		"name": "blackhole", "type": "timeout", "stream": "downstream", "toxicity": 1.0,
		"attributes": map[string]any{"timeout": 0},
	}, nil)
}

// ResetPeer makes every connection through the proxy reset (TCP RST) after
// ms milliseconds. Clear removes it.
func (p *Proxy) ResetPeer(ms int) error {
	return p.t.call("POST", "/proxies/"+p.Name+"/toxics", map[string]any{
		"name": "reset", "type": "reset_peer", "stream": "upstream", "toxicity": 1.0,
		"attributes": map[string]any{"timeout": ms},
	}, nil)
}

// Clear removes the proxy's toxics.
func (p *Proxy) Clear() error {
	var toxics []struct {
		Name string `json:"name"`
	}
	if err := p.t.call("GET", "/proxies/"+p.Name+"/toxics", nil, &toxics); err != nil {
		return err
	}
	for _, x := range toxics {
		if err := p.t.call("DELETE", "/proxies/"+p.Name+"/toxics/"+x.Name, nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// Stop shuts the server down and removes its directory.
func (t *Toxiproxy) Stop() error {
	if t.proc != nil {
		if err := t.proc.stop(10 * time.Second); err != nil {
			return fmt.Errorf("testenv: toxiproxy %s", err)
		}
	}
	return os.RemoveAll(t.Dir)
}
