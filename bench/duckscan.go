package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// DuckDB as the read amplification phase's second reader. iceberg-go, the
// harness's own reader, applies position deletes and deletion vectors by
// copying every column of each record batch that holds a deleted row
// (compute.Take), so a table with a few deletes spread over a large file
// reads at about the cost of copying it; DuckDB drops the rows through a
// selection vector. The phase reports both: what a Go reader pays and what
// an analyst's engine pays.

// duckPython is the Python of the venv scripts/engines.sh builds (DuckDB and
// its iceberg extension, pinned), duckScript the scans it runs and
// duckEngines the directory of duckdb_read.py, which loads the extensions
// from their PyPI packages' files; all relative to the repository's root,
// where the harness runs.
const (
	duckPython  = ".tools/venv/bin/python"
	duckScript  = "bench/duckscan.py"
	duckEngines = "integration/engines"
)

// duckScanResult is DuckDB's fastest scan of one snapshot.
type duckScanResult struct {
	Snapshot int64   `json:"snapshot"`
	Rows     int64   `json:"rows"`
	Seconds  float64 `json:"seconds"`
}

// duckScans scans the given snapshots of the table whose metadata file is
// metadata with DuckDB, rounds times each, and returns the fastest scan of
// each and DuckDB's version. A warehouse other than a local directory, or
// a machine without the venv, is an error that says so.
func duckScans(metadata string, snapshots []int64, rounds int) ([]duckScanResult, string, error) {
	u, err := url.Parse(metadata)
	if err != nil || (u.Scheme != "file" && u.Scheme != "") || !filepath.IsAbs(u.Path) {
		return nil, "", fmt.Errorf("DuckDB reads only a local warehouse here, not %s", metadata)
	}
	if _, err := os.Stat(duckPython); err != nil {
		return nil, "", fmt.Errorf("no DuckDB: %s is missing; bash scripts/engines.sh installs it", duckPython)
	}
	req, err := json.Marshal(map[string]any{"metadata": u.Path, "snapshots": snapshots, "rounds": rounds})
	if err != nil {
		return nil, "", err
	}
	var out, stderr bytes.Buffer
	cmd := exec.Command(duckPython, duckScript, duckEngines)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(req), &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, "", fmt.Errorf("DuckDB scans: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var ans struct {
		DuckDB string           `json:"duckdb"`
		Scans  []duckScanResult `json:"scans"`
	}
	if err := json.Unmarshal(out.Bytes(), &ans); err != nil {
		return nil, "", fmt.Errorf("DuckDB scans: %w: %q", err, out.String())
	}
	if len(ans.Scans) != len(snapshots) {
		return nil, "", errors.New("DuckDB scans: the answer does not cover every snapshot")
	}
	return ans.Scans, ans.DuckDB, nil
}
