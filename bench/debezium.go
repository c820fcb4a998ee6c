package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync/integration/testenv"
)

// The Debezium peer (issue 20): Debezium's MySQL connector reading the
// catch-up's binlog range into a consumer that discards the events, so that
// cdcsync end to end stands next to what most CDC-to-Iceberg pipelines
// decode with. bench/debezium/ holds the Maven project; the harness builds it
// into .tools/debezium (the peer's jar and its classpath, git-ignored, like
// MinIO's binary in .tools/bin) and builds it again only when the pom or the
// Java source changes, so Maven runs once and a run needs no network.

const debeziumFix = "install Java 17+ and Maven (apt-get install openjdk-17-jdk-headless maven), or pass --debezium=false"

// debeziumResult is the peer's measurement.
type debeziumResult struct {
	Connector string `json:"connector"`
	Version   string `json:"debezium_version"`
	Java      string `json:"java"`
	// The warm pass (the range's last reading, each by a new engine in the
	// same JVM), which the ratios use, and the cold first pass.
	Changes        int64   `json:"row_changes"`
	Seconds        float64 `json:"seconds"`
	CPUSeconds     float64 `json:"cpu_seconds"`
	CPUMicros      float64 `json:"cpu_us_per_change"`
	Rate           float64 `json:"changes_per_s"`
	ColdSeconds    float64 `json:"cold_seconds"`
	ColdCPUSeconds float64 `json:"cold_cpu_seconds"`
	ColdCPUMicros  float64 `json:"cold_cpu_us_per_change"`
	ColdRate       float64 `json:"cold_changes_per_s"`
	// JVMStartSeconds is the JVM's uptime when the peer's main began;
	// ReadySeconds the cold pass's engine start (connector, schema capture)
	// until its binlog client was connected, where the timer starts.
	JVMStartSeconds float64 `json:"jvm_start_seconds"`
	ReadySeconds    float64 `json:"cold_ready_seconds"`
	// ProcessCPUSeconds is the JVM's CPU from start to exit, both passes,
	// startup and schema captures included.
	ProcessCPUSeconds float64    `json:"process_cpu_seconds"`
	WallSeconds       float64    `json:"process_wall_seconds"`
	Passes            []peerPass `json:"passes"`
	Error             string     `json:"error,omitempty"`
}

// peerPass is one reading of the range by the peer.
type peerPass struct {
	Changes int64   `json:"changes"`
	Wall    float64 `json:"wall_s"`
	CPU     float64 `json:"cpu_s"`
	Ready   float64 `json:"ready_s"` // engine start to binlog client connected
}

// debeziumSources are the files whose hash decides whether the cached build
// is current: the pom and everything under src/.
func debeziumSources(project string) ([]string, error) {
	files := []string{filepath.Join(project, "pom.xml")}
	err := filepath.WalkDir(filepath.Join(project, "src"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files[1:])
	return files, err
}

func debeziumStamp(project string) (string, error) {
	files, err := debeziumSources(project)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(project, f)
		fmt.Fprintf(h, "%s %d\n", rel, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// javaMajor is the feature version of the java on PATH (17, 21, ...).
func javaMajor() (int, error) {
	out, err := exec.Command("java", "-XshowSettings:properties", "-version").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("java -version: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "java.specification.version" {
			major, _, _ := strings.Cut(strings.TrimSpace(v), ".")
			if major == "1" { // 1.8
				return 8, nil
			}
			return strconv.Atoi(major)
		}
	}
	return 0, fmt.Errorf("java -version printed no java.specification.version")
}

// buildDebezium returns the classpath directory of the peer (every jar in
// it), building bench/debezium with Maven into <repo>/.tools/debezium when
// the cached build is missing or older than the project's files.
func buildDebezium(root string) (string, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return "", fmt.Errorf("the Debezium peer needs java, which is not on PATH: %s", debeziumFix)
	}
	if v, err := javaMajor(); err != nil || v < 17 {
		if err == nil {
			err = fmt.Errorf("java is version %d", v)
		}
		return "", fmt.Errorf("the Debezium peer needs Java 17 or later (%v): %s", err, debeziumFix)
	}
	project := filepath.Join(root, "bench", "debezium")
	want, err := debeziumStamp(project)
	if err != nil {
		return "", fmt.Errorf("the Debezium peer's sources: %w", err)
	}
	dest := filepath.Join(root, ".tools", "debezium")
	if got, err := os.ReadFile(filepath.Join(dest, ".stamp")); err == nil && strings.TrimSpace(string(got)) == want {
		return dest, nil
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", fmt.Errorf("the Debezium peer is built with Maven, and mvn is not on PATH: %s", debeziumFix)
	}
	logf("building the Debezium peer with Maven into %s (first time: about 45 MB from Maven Central)", dest)
	t0 := time.Now()
	tmp := dest + ".tmp"
	os.RemoveAll(tmp)
	// Maven's own build directory goes under .tools too, so that the work
	// tree stays clean; its output is shown only when it fails.
	mvn := exec.Command("mvn", "-q", "-B", "-f", filepath.Join(project, "pom.xml"), "package", "dependency:copy-dependencies",
		"-Dpeer.dir="+tmp, "-Dpeer.build="+filepath.Join(root, ".tools", "debezium-build"))
	var out bytes.Buffer
	mvn.Stdout, mvn.Stderr = &out, &out
	if err := mvn.Run(); err != nil {
		return "", fmt.Errorf("mvn package of bench/debezium failed (%v); is Maven Central reachable, or a mirror set in ~/.m2/settings.xml? Or pass --debezium=false.\n%s", err, out.String())
	}
	if err := os.WriteFile(filepath.Join(tmp, ".stamp"), []byte(want+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.RemoveAll(dest); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dest); err != nil {
		return "", err
	}
	logf("built the Debezium peer in %.0f s", time.Since(t0).Seconds())
	return dest, nil
}

// peerOutput is the JSON line DebeziumPeer prints.
type peerOutput struct {
	Connector  string     `json:"connector"`
	Debezium   string     `json:"debezium"`
	Java       string     `json:"java"`
	JVMStart   float64    `json:"jvm_start_s"`
	Passes     []peerPass `json:"passes"`
	ProcessCPU float64    `json:"process_cpu_s"`
}

// runDebezium runs the peer over the binlog from start until it has seen
// changes row change events (what baseline A counted in the same range),
// passes times in one JVM: cold first, warmer after. Its stderr goes to
// logPath.
func runDebezium(classpath string, db *testenv.MariaDB, start mysql.Position, changes int64, passes int, logPath string) (debeziumResult, error) {
	var res debeziumResult
	logFile, err := os.Create(logPath)
	if err != nil {
		return res, err
	}
	defer logFile.Close()
	// root: the connector's schema capture needs more than the bench
	// account's grants (SHOW CREATE TABLE of every table it lists, RELOAD
	// for FLUSH); the binlog it reads is the same.
	cmd := exec.Command("java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.logFile=System.err",
		"-cp", filepath.Join(classpath, "*"), "cdcsync.bench.DebeziumPeer",
		"--host="+db.Host, "--port="+strconv.Itoa(db.Port), "--user="+testenv.RootUser, "--password=",
		"--server-id=4244", "--file="+start.Name, "--pos="+strconv.FormatUint(uint64(start.Pos), 10),
		"--changes="+strconv.FormatInt(changes, 10), "--passes="+strconv.Itoa(passes), "--timeout=900", "--table="+benchDB+"."+benchTable)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, logFile
	t0 := time.Now()
	err = cmd.Run()
	res.WallSeconds = time.Since(t0).Seconds()
	if err != nil {
		return res, fmt.Errorf("the Debezium peer failed (%v); its log, %s, ends:\n%s", err, logPath, tail(logPath, 30))
	}
	var po peerOutput
	line := strings.TrimSpace(stdout.String())
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	if err := json.Unmarshal([]byte(line), &po); err != nil || len(po.Passes) == 0 {
		return res, fmt.Errorf("the Debezium peer printed no figures (%v): %q", err, stdout.String())
	}
	res.Connector, res.Version, res.Java = po.Connector, po.Debezium, po.Java
	res.JVMStartSeconds, res.ProcessCPUSeconds, res.Passes = po.JVMStart, po.ProcessCPU, po.Passes
	cold, warm := po.Passes[0], po.Passes[len(po.Passes)-1]
	res.Changes = warm.Changes
	res.Seconds, res.CPUSeconds = warm.Wall, warm.CPU
	res.CPUMicros = warm.CPU * 1e6 / float64(warm.Changes)
	res.Rate = float64(warm.Changes) / warm.Wall
	res.ColdSeconds, res.ColdCPUSeconds = cold.Wall, cold.CPU
	res.ColdCPUMicros = cold.CPU * 1e6 / float64(cold.Changes)
	res.ColdRate = float64(cold.Changes) / cold.Wall
	res.ReadySeconds = cold.Ready
	return res, nil
}

// tail is the last n lines of the file at path.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
