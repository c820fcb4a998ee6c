package lease

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Holder identifies a daemon process.
type Holder struct {
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// Machine names the process table PID is in (the kernel's boot id and
	// PID namespace on Linux; empty elsewhere): a holder of the same
	// Machine can be looked up by PID.
	Machine string `json:"machine,omitempty"`
	// ProcStart is the kernel's start time of PID, which tells a reused
	// PID from the holder.
	ProcStart uint64 `json:"proc_start,omitempty"`
	// Instance is random per process: a daemon recognizes its own lease.
	Instance string `json:"instance"`
}

// String names the holder for messages: "host-a pid 4242".
func (h Holder) String() string { return fmt.Sprintf("%s pid %d", h.Host, h.PID) }

// Self describes the running process.
func Self() Holder {
	host, _ := os.Hostname()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	pid := os.Getpid()
	start, _ := procStart(pid)
	return Holder{Host: host, PID: pid, Started: time.Now().UTC().Truncate(time.Second),
		Machine: machine(), ProcStart: start, Instance: hex.EncodeToString(b)}
}

// gone reports whether h is provably not running: it ran in this
// process table and its PID is gone or now belongs to another process.
// Anything it cannot prove (another machine, no /proc) counts as running.
func (h Holder) gone(self Holder) bool {
	if h.Machine == "" || h.Machine != self.Machine || h.ProcStart == 0 {
		return false
	}
	if h.PID == self.PID {
		// This process holds the PID now, and it is not h (another
		// Instance): h is an earlier process, e.g. of a restarted container.
		return true
	}
	start, err := procStart(h.PID)
	if err != nil {
		// /proc may hide other users' processes (hidepid): only the
		// kernel's answer that no such process exists proves it gone.
		return errors.Is(syscall.Kill(h.PID, 0), syscall.ESRCH)
	}
	return start != h.ProcStart
}

// machine names the current process table: the boot id and the PID
// namespace ("" when /proc does not tell).
func machine() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(boot)) + "/" + ns
}

// procStart reads the start time of process pid, in clock ticks after
// boot (the 22nd field of /proc/PID/stat).
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22 is the 20th after the name
}
