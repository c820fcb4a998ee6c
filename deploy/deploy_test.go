// Package deploy holds the systemd unit, the Helm chart, the Prometheus
// rules and the Grafana dashboard. The tests check the unit with
// systemd-analyze, and render the chart with a small implementation of
// the Helm template functions it uses (text/template), then check the
// manifests and load the cdcsync configuration they carry with
// config.Load. When helm is installed (CDCSYNC_HELM=1 bash scripts/test.sh
// builds it into .tools/bin), helm lint --strict must pass and helm
// template must render the same manifests. The rules and the dashboard
// may name only metrics cdcsync exports; when promtool is installed, the
// rules' unit tests (prometheus/cdcsync-rules.test.yaml) must pass.
package deploy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"text/template"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/metrics"
)

const chartDir = "helm/cdcsync"

// --- systemd ---

func TestSystemdUnit(t *testing.T) {
	raw, err := os.ReadFile("systemd/cdcsync.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := map[string][]string{} // "Section.Key" -> values
	section := ""
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("not a key=value line: %q", line)
			}
			unit[section+"."+k] = append(unit[section+"."+k], v)
		}
	}
	want := map[string]string{
		"Service.ExecStart":                "/usr/local/bin/cdcsync run --config /etc/cdcsync/cdcsync.yaml",
		"Service.DynamicUser":              "yes",
		"Service.ProtectSystem":            "strict",
		"Service.ProtectHome":              "yes",
		"Service.PrivateTmp":               "yes",
		"Service.NoNewPrivileges":          "yes",
		"Service.RestrictAddressFamilies":  "AF_UNIX AF_INET AF_INET6",
		"Service.Restart":                  "on-failure",
		"Service.RestartPreventExitStatus": "2",
		"Service.EnvironmentFile":          "/etc/cdcsync/cdcsync.env",
		"Service.ReadWritePaths":           "/var/lib/cdcsync",
		"Service.StateDirectory":           "cdcsync",
		"Service.RuntimeDirectory":         "cdcsync",
		"Service.RuntimeDirectoryMode":     "0700",
		// Not invisible: a standby would take a holder of another user
		// for a dead process (lease.Holder.gone) and skip the fence.
		"Service.ProtectProc": "noaccess",
		"Install.WantedBy":    "multi-user.target",
	}
	for k, v := range want {
		if got := unit[k]; !slices.Contains(got, v) {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if len(unit["Service.MemoryMax"]) == 0 || len(unit["Service.LimitNOFILE"]) == 0 || len(unit["Service.TimeoutStopSec"]) == 0 {
		t.Error("the unit sets no MemoryMax, LimitNOFILE or TimeoutStopSec")
	}
	// SIGTERM: the last commit (2 minutes at most) and the release of the
	// lease (10 s) before SIGKILL.
	if stop, err := strconv.Atoi(strings.Join(unit["Service.TimeoutStopSec"], "")); err != nil || stop < 130 {
		t.Errorf("TimeoutStopSec %q: want at least 130 (seconds)", unit["Service.TimeoutStopSec"])
	}
	// The header's admin.listen is a socket in the runtime directory
	// (PrivateTmp hides the default one under /tmp from cdcsync resync),
	// and the configuration accepts it.
	m := regexp.MustCompile(`(?m)^#\s+listen: (\S+)`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("the unit's header shows no admin.listen for cdcsync.yaml")
	}
	sock := strings.ReplaceAll(string(m[1]), "PIPELINE", "shop-prod")
	if filepath.Dir(sock) != "/run/cdcsync" {
		t.Errorf("the header's admin.listen %s is not in the unit's RuntimeDirectory /run/cdcsync", sock)
	}
	cfgText := "pipeline: shop-prod\nsource: {host: db, user: cdcsync, server_id: 4242, include: [\"shop.*\"]}\n" +
		"warehouse: {location: /var/lib/cdcsync/warehouse}\ncatalog: {type: sql, sql: {driver: sqlite, dsn: /var/lib/cdcsync/catalog.db}}\n" +
		"admin: {listen: " + sock + "}\n"
	if cfg := loadConfig(t, cfgText); cfg.Admin.Network() != "unix" || cfg.Admin.Listen != sock || cfg.Admin.DefaultSocket() {
		t.Errorf("admin.listen %s loads as %q (%s)", sock, cfg.Admin.Listen, cfg.Admin.Network())
	}

	// systemd-analyze verify checks every key and that ExecStart is an
	// executable: point it at this test's own binary.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "cdcsync.service")
	if err := os.WriteFile(path, bytes.ReplaceAll(raw, []byte("/usr/local/bin/cdcsync"), []byte(self)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatalf("systemd-analyze (Debian's systemd package) is not installed: %v", err)
	}
	out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The exposure systemd rates the sandbox at: 1.4 ("OK") when written;
	// fail above 2.0.
	out, err = exec.Command("systemd-analyze", "security", "--offline=true", "--threshold=20", "--no-pager", path).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security rates the unit above 2.0: %v\n%s", err, out)
	}
}

// --- Helm ---

// chart renders the chart's templates the way helm template does, for the
// functions the chart uses.
type chart struct {
	meta   map[string]any
	values map[string]any
	tpl    *template.Template
	files  []string
}

func loadChart(t *testing.T) *chart {
	t.Helper()
	c := &chart{}
	for file, dst := range map[string]*map[string]any{"Chart.yaml": &c.meta, "values.yaml": &c.values} {
		raw, err := os.ReadFile(filepath.Join(chartDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(raw, dst); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	c.tpl = template.New("chart").Option("missingkey=zero").Funcs(c.funcs())
	files, err := filepath.Glob(filepath.Join(chartDir, "templates", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.tpl.New(filepath.Base(f)).Parse(string(raw)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if strings.HasSuffix(f, ".yaml") {
			c.files = append(c.files, filepath.Base(f))
		}
	}
	return c
}

var errFail = errors.New("fail")

func (c *chart) funcs() template.FuncMap {
	return template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var b strings.Builder
			err := c.tpl.ExecuteTemplate(&b, name, data)
			return b.String(), err
		},
		"toYaml": func(v any) (string, error) {
			var b bytes.Buffer
			e := yaml.NewEncoder(&b)
			e.SetIndent(2)
			if err := e.Encode(v); err != nil {
				return "", err
			}
			return strings.TrimSuffix(b.String(), "\n"), nil
		},
		"indent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
		"nindent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return "\n" + pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
		"quote": func(v any) string { return strconv.Quote(fmt.Sprint(v)) },
		"default": func(def any, v ...any) any {
			if len(v) == 0 || empty(v[0]) {
				return def
			}
			return v[0]
		},
		"trunc": func(n int, s string) string {
			if len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"contains":   func(sub, s string) bool { return strings.Contains(s, sub) },
		"replace":    func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"fail":       func(msg string) (string, error) { return "", fmt.Errorf("%w: %s", errFail, msg) },
		"sha256sum": func(s string) string {
			h := sha256.Sum256([]byte(s))
			return hex.EncodeToString(h[:])
		},
		"dict": func(kv ...any) map[string]any {
			m := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[fmt.Sprint(kv[i])] = kv[i+1]
			}
			return m
		},
		"deepCopy":       deepCopy,
		"mergeOverwrite": func(dst map[string]any, src ...map[string]any) map[string]any { return mergeInto(dst, src...) },
		"int": func(v any) int {
			switch x := v.(type) {
			case int:
				return x
			case float64:
				return int(x)
			}
			n, _ := strconv.Atoi(fmt.Sprint(v))
			return n
		},
	}
}

func empty(v any) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.String, reflect.Map, reflect.Slice:
		return r.Len() == 0
	case reflect.Bool:
		return !r.Bool()
	case reflect.Int, reflect.Int64:
		return r.Int() == 0
	case reflect.Float64:
		return r.Float() == 0
	}
	return false
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
}

// mergeInto merges src into dst, maps key by key, src winning.
func mergeInto(dst map[string]any, src ...map[string]any) map[string]any {
	for _, s := range src {
		for k, v := range s {
			if sm, ok := v.(map[string]any); ok {
				if dm, ok := dst[k].(map[string]any); ok {
					dst[k] = mergeInto(dm, sm)
					continue
				}
			}
			dst[k] = deepCopy(v)
		}
	}
	return dst
}

// render renders every manifest with the chart's values merged with
// overrides, as helm template RELEASE --set ... does.
func (c *chart) render(release string, overrides map[string]any) (string, error) {
	values := mergeInto(deepCopy(c.values).(map[string]any), overrides)
	data := map[string]any{
		"Values":  values,
		"Release": map[string]any{"Name": release, "Namespace": "default", "Service": "Helm"},
		"Chart": map[string]any{"Name": c.meta["name"], "Version": c.meta["version"], "AppVersion": c.meta["appVersion"],
			"Description": c.meta["description"]},
	}
	var out strings.Builder
	for _, f := range c.files {
		var b strings.Builder
		if err := c.tpl.ExecuteTemplate(&b, f, data); err != nil {
			return "", err
		}
		s := strings.ReplaceAll(b.String(), "<no value>", "")
		if strings.TrimSpace(s) != "" {
			fmt.Fprintf(&out, "---\n# Source: cdcsync/templates/%s\n%s\n", f, s)
		}
	}
	return out.String(), nil
}

// manifests parses rendered YAML into its documents, keyed "Kind/name".
func manifests(t *testing.T, rendered string) map[string]map[string]any {
	t.Helper()
	docs := map[string]map[string]any{}
	d := yaml.NewDecoder(strings.NewReader(rendered))
	for {
		var m map[string]any
		err := d.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the chart renders invalid YAML: %v\n%s", err, rendered)
		}
		if m == nil {
			continue
		}
		kind, _ := m["kind"].(string)
		name, _ := get(m, "metadata", "name").(string)
		docs[kind+"/"+name] = m
	}
	return docs
}

// get walks maps and lists: keys are strings, list indexes ints.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

var dns1123 = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func TestHelmChart(t *testing.T) {
	c := loadChart(t)
	rendered, err := c.render("shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	docs := manifests(t, rendered)
	for _, want := range []string{"ServiceAccount/shop-cdcsync", "Secret/shop-cdcsync", "ConfigMap/shop-cdcsync", "Service/shop-cdcsync", "Deployment/shop-cdcsync"} {
		if docs[want] == nil {
			t.Errorf("the chart renders no %s; it renders %v", want, slices.Sorted(maps.Keys(docs)))
		}
	}
	if len(docs) != 5 {
		t.Errorf("the chart renders %v; want 5 objects (no ServiceMonitor unless enabled)", slices.Sorted(maps.Keys(docs)))
	}
	for key, m := range docs {
		name, _ := get(m, "metadata", "name").(string)
		if !dns1123.MatchString(name) || len(name) > 63 {
			t.Errorf("%s: %q is not a valid object name", key, name)
		}
		if get(m, "metadata", "labels", "app.kubernetes.io/instance") != "shop" || get(m, "apiVersion") == nil {
			t.Errorf("%s lacks its apiVersion or labels", key)
		}
	}

	dep := docs["Deployment/shop-cdcsync"]
	spec := get(dep, "spec").(map[string]any)
	if spec["replicas"] != 1 {
		t.Errorf("without standby the chart runs 1 replica, got %v", spec["replicas"])
	}
	checkUpgrade(t, spec)
	sel := get(spec, "selector", "matchLabels").(map[string]any)
	podLabels := get(spec, "template", "metadata", "labels").(map[string]any)
	for k, v := range sel {
		if podLabels[k] != v {
			t.Errorf("the selector's %s=%v is not a label of the pod", k, v)
		}
	}
	if svcSel := get(docs["Service/shop-cdcsync"], "spec", "selector"); !reflect.DeepEqual(svcSel, any(sel)) {
		t.Errorf("the Service selects %v, the Deployment %v", svcSel, sel)
	}
	pod := get(spec, "template", "spec")
	if get(pod, "securityContext", "runAsNonRoot") != true || get(pod, "securityContext", "runAsUser") == 0 {
		t.Errorf("the pod may run as root: %v", get(pod, "securityContext"))
	}
	ctr := get(pod, "containers", 0)
	if get(ctr, "securityContext", "readOnlyRootFilesystem") != true || get(ctr, "securityContext", "allowPrivilegeEscalation") != false ||
		!slices.Contains(get(ctr, "securityContext", "capabilities", "drop").([]any), any("ALL")) {
		t.Errorf("the container's securityContext: %v", get(ctr, "securityContext"))
	}
	if !reflect.DeepEqual(get(ctr, "args"), []any{"run", "--config", "/etc/cdcsync/cdcsync.yaml"}) {
		t.Errorf("args %v", get(ctr, "args"))
	}
	if get(ctr, "ports", 0, "name") != "http" || get(ctr, "ports", 0, "containerPort") != 9187 ||
		get(docs["Service/shop-cdcsync"], "spec", "ports", 0, "targetPort") != "http" {
		t.Errorf("the container's port %v and the Service's %v", get(ctr, "ports"), get(docs["Service/shop-cdcsync"], "spec", "ports"))
	}
	// Readiness is /healthz: /readyz is 503 on a standby, which would
	// stall every rolling update (see checkUpgrade).
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/healthz"} {
		if get(ctr, probe, "httpGet", "path") != path || get(ctr, probe, "httpGet", "port") != "http" {
			t.Errorf("%s: %v, want GET %s on the http port", probe, get(ctr, probe), path)
		}
	}
	// SIGTERM: the last commit (merge.Options.ShutdownTimeout, 2 minutes)
	// and the release of the lease (10 s) before Kubernetes sends SIGKILL.
	if g, _ := get(pod, "terminationGracePeriodSeconds").(int); g < 130 {
		t.Errorf("terminationGracePeriodSeconds %v: the holder needs 2 min for its last commit and 10 s to release the lease", get(pod, "terminationGracePeriodSeconds"))
	}
	// A restarted container sees that the old holder is gone (the same
	// PID namespace) and takes the pipeline back at once.
	if get(pod, "shareProcessNamespace") != true {
		t.Errorf("shareProcessNamespace %v, want true", get(pod, "shareProcessNamespace"))
	}
	if a := get(pod, "affinity"); a != nil {
		t.Errorf("affinity %v without standby and without affinity in the values", a)
	}
	mounts := map[string]string{}
	for i := 0; get(ctr, "volumeMounts", i) != nil; i++ {
		mounts[get(ctr, "volumeMounts", i, "mountPath").(string)] = get(ctr, "volumeMounts", i, "name").(string)
	}
	if mounts["/etc/cdcsync"] != "config" || mounts["/tmp"] != "tmp" || mounts["/var/lib/cdcsync"] != "state" {
		t.Errorf("mounts %v: want the configuration at /etc/cdcsync, a writable /tmp and /var/lib/cdcsync (the key index)", mounts)
	}
	env := map[string]any{}
	for i := 0; get(ctr, "env", i) != nil; i++ {
		env[get(ctr, "env", i, "name").(string)] = get(ctr, "env", i, "value")
	}
	if env["STATE_DIRECTORY"] != "/var/lib/cdcsync" {
		t.Errorf("env %v: STATE_DIRECTORY must point at the writable /var/lib/cdcsync, where the key index goes (the root file system is read-only)", env)
	}
	if get(pod, "volumes", 0, "configMap", "name") != "shop-cdcsync" {
		t.Errorf("volumes %v", get(pod, "volumes"))
	}
	if get(ctr, "envFrom", 0, "secretRef", "name") != "shop-cdcsync" {
		t.Errorf("the environment does not come from the Secret: %v", get(ctr, "envFrom"))
	}

	// The configuration loads, with the Secret's keys as environment, and
	// listens where the probes look.
	secret := get(docs["Secret/shop-cdcsync"], "stringData").(map[string]any)
	cfgText := get(docs["ConfigMap/shop-cdcsync"], "data", "cdcsync.yaml").(string)
	for _, ref := range regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(cfgText, -1) {
		if _, ok := secret[ref[1]]; !ok {
			t.Errorf("the configuration reads ${%s}, which the Secret does not hold", ref[1])
		}
	}
	for k := range secret {
		t.Setenv(k, "x")
	}
	cfg := loadConfig(t, cfgText)
	if cfg.HTTP.Listen != "0.0.0.0:9187" {
		t.Errorf("http.listen is %q; the probes need 0.0.0.0:9187", cfg.HTTP.Listen)
	}
	if sum := get(spec, "template", "metadata", "annotations", "checksum/config"); sum == nil {
		t.Error("no checksum/config annotation: a new configuration would not restart the pod")
	}

	// Another port, a ServiceMonitor, an existing Secret.
	rendered, err = c.render("orders-pipeline", map[string]any{
		"service":        map[string]any{"port": 9300},
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
		"secret":         map[string]any{"create": false, "existingSecret": "orders-secrets"},
		"config":         map[string]any{"http": map[string]any{"listen": "127.0.0.1:1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	docs = manifests(t, rendered)
	if docs["Secret/orders-pipeline-cdcsync"] != nil {
		t.Error("a Secret is rendered with secret.create false")
	}
	ctr = get(docs["Deployment/orders-pipeline-cdcsync"], "spec", "template", "spec", "containers", 0)
	if get(ctr, "envFrom", 0, "secretRef", "name") != "orders-secrets" || get(ctr, "ports", 0, "containerPort") != 9300 {
		t.Errorf("container %v", ctr)
	}
	cfg = loadConfig(t, get(docs["ConfigMap/orders-pipeline-cdcsync"], "data", "cdcsync.yaml").(string))
	if cfg.HTTP.Listen != "0.0.0.0:9300" {
		t.Errorf("http.listen is %q with service.port 9300 and a config that listens elsewhere", cfg.HTTP.Listen)
	}
	sm := docs["ServiceMonitor/orders-pipeline-cdcsync"]
	if sm == nil || get(sm, "spec", "endpoints", 0, "port") != "http" || get(sm, "spec", "endpoints", 0, "path") != "/metrics" ||
		get(sm, "metadata", "labels", "release") != "prom" ||
		!reflect.DeepEqual(get(sm, "spec", "selector", "matchLabels"), get(docs["Service/orders-pipeline-cdcsync"], "spec", "selector")) {
		t.Errorf("ServiceMonitor %v", sm)
	}
	// The rules (deploy/prometheus) select job="cdcsync" and group a
	// pipeline's daemons by the label pipeline.
	jobLabel, _ := get(sm, "spec", "jobLabel").(string)
	if job := get(docs["Service/orders-pipeline-cdcsync"], "metadata", "labels", jobLabel); job != "cdcsync" {
		t.Errorf("the ServiceMonitor takes the job from the Service's label %q, which is %v; the rules expect job=\"cdcsync\"", jobLabel, job)
	}
	if rl := get(sm, "spec", "endpoints", 0, "relabelings", 0); get(rl, "targetLabel") != "pipeline" || get(rl, "replacement") != "cdcsync" ||
		get(rl, "sourceLabels") != nil {
		t.Errorf("the ServiceMonitor does not label the targets pipeline=\"cdcsync\" (config.pipeline): %v", get(sm, "spec", "endpoints", 0, "relabelings"))
	}

	// standby: 2 replicas (one holds the lease, one waits), spread over
	// nodes, the same upgrade, and the configuration is unchanged.
	rendered, err = c.render("shop", map[string]any{"standby": true, "config": map[string]any{"pipeline": "shop-prod"},
		"serviceMonitor": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatalf("standby: true: %v", err)
	}
	docs = manifests(t, rendered)
	spec = get(docs["Deployment/shop-cdcsync"], "spec").(map[string]any)
	if spec["replicas"] != 2 {
		t.Errorf("standby: true runs %v replicas, want 2", spec["replicas"])
	}
	checkUpgrade(t, spec)
	term := get(spec, "template", "spec", "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution", 0, "podAffinityTerm")
	if get(term, "topologyKey") != "kubernetes.io/hostname" ||
		!reflect.DeepEqual(get(term, "labelSelector", "matchLabels"), get(spec, "selector", "matchLabels")) {
		t.Errorf("standby: true does not spread the two pods over nodes: affinity %v", get(spec, "template", "spec", "affinity"))
	}
	if cfg := loadConfig(t, get(docs["ConfigMap/shop-cdcsync"], "data", "cdcsync.yaml").(string)); cfg.Pipeline != "shop-prod" || !cfg.Lease.Wait {
		t.Errorf("standby: true: pipeline %q, lease.wait %v; the standby must wait for the lease", cfg.Pipeline, cfg.Lease.Wait)
	}
	if get(docs["ServiceMonitor/shop-cdcsync"], "spec", "endpoints", 0, "relabelings", 0, "replacement") != "shop-prod" {
		t.Errorf("the ServiceMonitor's pipeline label is not config.pipeline: %v", get(docs["ServiceMonitor/shop-cdcsync"], "spec", "endpoints", 0))
	}
	// An affinity of the values replaces the chart's.
	mine := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"cdc"}}}}}}}}
	rendered, err = c.render("shop", map[string]any{"standby": true, "affinity": mine})
	if err != nil {
		t.Fatal(err)
	}
	if a := get(manifests(t, rendered)["Deployment/shop-cdcsync"], "spec", "template", "spec", "affinity"); !reflect.DeepEqual(a, any(mine)) {
		t.Errorf("affinity %v, want the values' %v", a, mine)
	}
}

// checkUpgrade checks the Deployment's strategy against the lease. A new
// pod waits as a standby until the old holder releases the pipeline; it
// counts as ready because readiness is /healthz (checked above; /readyz is
// 503 on a standby). maxUnavailable 0: no old pod stops before a new one
// is ready, so a ready standby takes over when the holder stops, and a
// new pod that cannot start leaves the old ones running (with /readyz as
// readiness it would wait for ever). maxSurge 100%: all the new pods
// start at once, at most twice the replicas.
func checkUpgrade(t *testing.T, spec map[string]any) {
	t.Helper()
	if get(spec, "strategy", "type") != "RollingUpdate" {
		t.Fatalf("strategy %v, want RollingUpdate", get(spec, "strategy"))
	}
	replicas, _ := spec["replicas"].(int)
	surge := intOrPercent(t, get(spec, "strategy", "rollingUpdate", "maxSurge"), replicas, true)
	unavail := intOrPercent(t, get(spec, "strategy", "rollingUpdate", "maxUnavailable"), replicas, false)
	if unavail != 0 || surge != replicas {
		t.Errorf("maxSurge %d, maxUnavailable %d of %d replicas: want every new pod started before an old one stops (maxSurge 100%%, maxUnavailable 0)",
			surge, unavail, replicas)
	}
}

// intOrPercent resolves a maxSurge or maxUnavailable as the Deployment
// controller does (percentages of replicas, maxSurge rounded up,
// maxUnavailable down).
func intOrPercent(t *testing.T, v any, replicas int, roundUp bool) int {
	t.Helper()
	switch x := v.(type) {
	case int:
		return x
	case string:
		p, err := strconv.Atoi(strings.TrimSuffix(x, "%"))
		if err != nil || !strings.HasSuffix(x, "%") {
			t.Fatalf("%q is neither a number nor a percentage", x)
		}
		if roundUp {
			return (p*replicas + 99) / 100
		}
		return p * replicas / 100
	}
	t.Fatalf("%v (%T) is neither a number nor a percentage", v, v)
	return 0
}

func loadConfig(t *testing.T, text string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cdcsync.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("the chart's configuration does not load: %v\n%s", err, text)
	}
	if _, _, err := net.SplitHostPort(cfg.HTTP.Listen); err != nil {
		t.Fatalf("http.listen %q: %v", cfg.HTTP.Listen, err)
	}
	return cfg
}

// helm, when installed, agrees: lint --strict passes and helm template
// renders the same objects (compared as parsed YAML, the configuration
// too, without the checksum annotation, since toYaml indents lists
// differently).
func TestHelmAgrees(t *testing.T) {
	helm, err := exec.LookPath("helm")
	if err != nil {
		if p := filepath.Join("..", ".tools", "bin", "helm"); fileExists(p) {
			helm = p
		} else {
			t.Log("helm is not installed (CDCSYNC_HELM=1 bash scripts/test.sh builds it): only the chart's own rendering is checked")
			return
		}
	}
	for _, args := range [][]string{{"lint", "--strict", chartDir}, {"lint", "--strict", "--set", "standby=true", chartDir}} {
		if out, err := exec.Command(helm, args...).CombinedOutput(); err != nil {
			t.Fatalf("helm %v: %v\n%s", args, err, out)
		}
	}
	c := loadChart(t)
	for _, set := range [][]string{nil, {"serviceMonitor.enabled=true", "secret.create=false", "secret.existingSecret=s", "service.port=9300"},
		{"standby=true", "serviceMonitor.enabled=true", "config.pipeline=shop-prod"}} {
		args := []string{"template", "shop", chartDir}
		over := map[string]any{}
		for _, s := range set {
			args = append(args, "--set", s)
			k, v, _ := strings.Cut(s, "=")
			var val any = v
			if n, err := strconv.Atoi(v); err == nil {
				val = n
			} else if b, err := strconv.ParseBool(v); err == nil {
				val = b
			}
			parts := strings.Split(k, ".")
			m := over
			for _, p := range parts[:len(parts)-1] {
				if m[p] == nil {
					m[p] = map[string]any{}
				}
				m = m[p].(map[string]any)
			}
			m[parts[len(parts)-1]] = val
		}
		out, err := exec.Command(helm, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("helm %v: %v\n%s", args, err, out)
		}
		ours, err := c.render("shop", over)
		if err != nil {
			t.Fatal(err)
		}
		theirs, mine := normalize(t, manifests(t, string(out))), normalize(t, manifests(t, ours))
		if !reflect.DeepEqual(theirs, mine) {
			t.Errorf("--set %v: helm template renders\n%v\nthe test's renderer\n%v", set, theirs, mine)
		}
	}
}

func normalize(t *testing.T, docs map[string]map[string]any) map[string]map[string]any {
	for _, m := range docs {
		if ann, ok := get(m, "spec", "template", "metadata", "annotations").(map[string]any); ok {
			delete(ann, "checksum/config")
		}
		if data, ok := get(m, "data").(map[string]any); ok {
			keys := slices.Collect(maps.Keys(data))
			sort.Strings(keys)
			for _, k := range keys {
				var v any
				if err := yaml.Unmarshal([]byte(data[k].(string)), &v); err != nil {
					t.Fatal(err)
				}
				data[k] = v
			}
		}
	}
	return docs
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// --- Prometheus ---

// metricNames lists the metrics cdcsync exports (from the collectors'
// descriptions, so a vector without children counts too).
func metricNames(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New()
	ch := make(chan *prometheus.Desc, 1024)
	v := reflect.ValueOf(m).Elem()
	for i := 0; i < v.NumField(); i++ {
		if c, ok := v.Field(i).Interface().(prometheus.Collector); ok && !v.Field(i).IsNil() {
			c.Describe(ch)
		}
	}
	close(ch)
	names := map[string]bool{}
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		if sm := re.FindStringSubmatch(d.String()); sm != nil {
			names[sm[1]] = true
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[sm[1]+suffix] = true
			}
		}
	}
	if !names["cdcsync_tables_stopped"] {
		t.Fatalf("metrics.New describes no cdcsync_tables_stopped: %v", names)
	}
	return names
}

// variableLabels lists the labels of each cdcsync metric, from the
// collectors' descriptions.
func variableLabels(t *testing.T) map[string][]string {
	t.Helper()
	m := metrics.New()
	ch := make(chan *prometheus.Desc, 1024)
	v := reflect.ValueOf(m).Elem()
	for i := 0; i < v.NumField(); i++ {
		if c, ok := v.Field(i).Interface().(prometheus.Collector); ok && !v.Field(i).IsNil() {
			c.Describe(ch)
		}
	}
	close(ch)
	out := map[string][]string{}
	re := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	for d := range ch {
		if sm := re.FindStringSubmatch(d.String()); sm != nil && sm[2] != "" {
			out[sm[1]] = strings.Split(sm[2], ",")
		}
	}
	if !slices.Contains(out["cdcsync_maintenance_runs_total"], "table") {
		t.Fatalf("cannot read the labels of the metrics: %v", out)
	}
	return out
}

func TestPrometheusRules(t *testing.T) {
	raw, err := os.ReadFile("prometheus/cdcsync-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	d := yaml.NewDecoder(bytes.NewReader(raw))
	d.KnownFields(true)
	if err := d.Decode(&file); err != nil {
		t.Fatal(err)
	}
	names := metricNames(t)
	n := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %q lacks its alert, expr, severity or summary", r.Alert)
			}
			for _, m := range regexp.MustCompile(`\bcdcsync_[a-z_]+`).FindAllString(r.Expr, -1) {
				if !names[m] {
					t.Errorf("rule %s: cdcsync exports no metric %s", r.Alert, m)
				}
			}
			if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") {
				t.Errorf("rule %s: unbalanced parentheses in %s", r.Alert, r.Expr)
			}
		}
	}
	if n == 0 {
		t.Fatal("no rules")
	}

	// increase() counts nothing for a series that first appears at 1: a
	// counter a rule takes the increase of must exist at 0 from the start,
	// unless its children are per table (created with the table).
	fams, err := metrics.New().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	children := map[string][]map[string]string{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			children[f.GetName()] = append(children[f.GetName()], labels)
		}
	}
	re := regexp.MustCompile(`increase\((cdcsync_[a-z_]+)(?:\{([^}]*)\})?\[`)
	matcher := regexp.MustCompile(`([a-z_]+)="([^"]*)"`)
	checked := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			for _, m := range re.FindAllStringSubmatch(r.Expr, -1) {
				name, found := m[1], false
				for _, labels := range children[name] {
					ok := true
					for _, lm := range matcher.FindAllStringSubmatch(m[2], -1) {
						ok = ok && labels[lm[1]] == lm[2]
					}
					found = found || ok
				}
				switch {
				case found:
					checked++
				case slices.Contains(variableLabels(t)[name], "table"):
				default:
					t.Errorf("rule %s: %s{%s} does not exist before its first increment, so increase() misses that one", r.Alert, name, m[2])
				}
			}
		}
	}
	if checked < 2 {
		t.Errorf("%d counters checked; want at least the lease takeovers and the restarts", checked)
	}
}

// The rules' unit tests (prometheus/cdcsync-rules.test.yaml) cover the
// lease's alerts, and pass under promtool when it is installed.
func TestPrometheusRulesUnitTests(t *testing.T) {
	raw, err := os.ReadFile("prometheus/cdcsync-rules.test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Alerts []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(raw, &tests); err != nil {
		t.Fatal(err)
	}
	fired := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.Alerts {
			if len(a.ExpAlerts) > 0 {
				fired[a.Alertname] = true
			}
		}
	}
	for _, name := range []string{"CdcsyncNoHolder", "CdcsyncAbsent", "CdcsyncDown", "CdcsyncLeaseExpired", "CdcsyncLagging",
		"CdcsyncSourceDisconnected", "CdcsyncTableStopped", "CdcsyncRestarting", "CdcsyncCrashLooping"} {
		if !fired[name] {
			t.Errorf("prometheus/cdcsync-rules.test.yaml never expects %s to fire", name)
		}
	}
	if !reflect.DeepEqual(tests.RuleFiles, []string{"cdcsync-rules.yaml"}) {
		t.Errorf("rule_files %v", tests.RuleFiles)
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if p := filepath.Join("..", ".tools", "bin", "promtool"); fileExists(p) {
			promtool = p
		} else {
			t.Log("promtool is not installed: the rules' unit tests do not run (docs/operations.md, Monitoring, says how to build it)")
			return
		}
	}
	if out, err := exec.Command(promtool, "check", "rules", "prometheus/cdcsync-rules.yaml").CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	// The rules without their descriptions, so that the tests compare
	// the labels, the timing and the summaries only.
	var rules map[string]any
	rulesRaw, err := os.ReadFile("prometheus/cdcsync-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(rulesRaw, &rules); err != nil {
		t.Fatal(err)
	}
	for i := 0; get(rules, "groups", i) != nil; i++ {
		for j := 0; get(rules, "groups", i, "rules", j) != nil; j++ {
			delete(get(rules, "groups", i, "rules", j, "annotations").(map[string]any), "description")
		}
	}
	stripped, err := yaml.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"cdcsync-rules.yaml": stripped, "cdcsync-rules.test.yaml": raw} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(promtool, "test", "rules", "cdcsync-rules.test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}

// The Grafana dashboard is valid JSON, its panels have distinct ids and a
// place, and every cdcsync metric a query names exists.
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile("grafana/cdcsync.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID      int            `json:"id"`
			Title   string         `json:"title"`
			GridPos map[string]int `json:"gridPos"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("grafana/cdcsync.json: %v", err)
	}
	names := metricNames(t)
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] || p.Title == "" || p.GridPos["w"] == 0 || len(p.Targets) == 0 {
			t.Errorf("panel %d %q: duplicate id, or no title, place or query", p.ID, p.Title)
		}
		ids[p.ID] = true
		for _, q := range p.Targets {
			for _, m := range regexp.MustCompile(`\bcdcsync_[a-z_]+`).FindAllString(q.Expr, -1) {
				if !names[m] {
					t.Errorf("panel %q: cdcsync exports no metric %s", p.Title, m)
				}
			}
		}
	}
	if dash.UID == "" || len(dash.Panels) < 10 {
		t.Errorf("uid %q, %d panels", dash.UID, len(dash.Panels))
	}
}
