package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at build time, each optional (docs/operations.md, "Building"):
//
//	go build -trimpath -ldflags "-s -w -X main.version=v1.2.0 -X main.commit=$(git rev-parse HEAD) \
//	  -X main.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" ./cmd/cdcsync
//
// Without them, the version is the module version Go records (the tag with
// `go install github.com/cdcsync/cdcsync/cmd/cdcsync@v1.2.0`, else "devel")
// and the commit and its time come from the VCS information Go stamps into
// builds made in a git checkout (vcs.revision, vcs.time, vcs.modified).
var (
	version string
	commit  string
	date    string
)

// versionInfo is what `cdcsync version` prints.
type versionInfo struct {
	Version    string
	Commit     string
	Modified   bool   // built from a checkout with uncommitted changes
	CommitTime string // the commit's time, from the VCS stamp
	BuildDate  string
	Go         string // the Go version and platform
}

// readVersion combines the -X values with the binary's build information.
func readVersion() versionInfo {
	v := versionInfo{Version: version, Commit: commit, BuildDate: date,
		Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v.defaults()
	}
	if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.Version = bi.Main.Version
	}
	var rev string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	if v.Commit == "" {
		v.Commit = rev
	} else if rev != "" && !strings.HasPrefix(rev, v.Commit) && !strings.HasPrefix(v.Commit, rev) {
		// The stamp describes another commit than -X main.commit: keep
		// only what -X says.
		v.CommitTime, v.Modified = "", false
	}
	return v.defaults()
}

func (v versionInfo) defaults() versionInfo {
	if v.Version == "" {
		v.Version = "devel"
	}
	for _, p := range []*string{&v.Commit, &v.CommitTime, &v.BuildDate} {
		if *p == "" {
			*p = "unknown"
		}
	}
	return v
}

func (v versionInfo) String() string {
	c := v.Commit
	if v.Modified {
		c += " (with uncommitted changes)"
	}
	return fmt.Sprintf("cdcsync %s\ncommit:      %s\ncommit time: %s\nbuild date:  %s\ngo:          %s\n",
		v.Version, c, v.CommitTime, v.BuildDate, v.Go)
}
