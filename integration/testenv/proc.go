package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// proc is a server child process in its own process group.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, valid after done is closed
}

// startProc starts name with args, output appended to logPath.
//
// The child gets its own process group (so signals meant for the test's
// terminal job, such as ^C, do not reach it and Stop/Kill can signal the
// whole group) and Pdeathsig=SIGKILL (so it dies with the test binary).
// Linux sends the parent-death signal when the *thread* that forked the child
// exits, so the fork happens on a goroutine locked to its OS thread, and that
// goroutine stays alive in Wait until the child has exited.
func startProc(name string, args, env []string, logPath string) (*proc, error) {
	return startProcAs(nil, name, args, env, logPath)
}

// startProcAs is startProc running the child as another user (cred), for
// servers that refuse to run as root.
func startProcAs(cred *syscall.Credential, name string, args, env []string, logPath string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			logf.Close()
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("testenv: start %s: %w", name, err)
	}
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the child's process group.
func (p *proc) signal(sig syscall.Signal) {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// wait waits up to d for the child to exit and reports whether it did.
func (p *proc) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// stop sends SIGTERM and waits up to grace; then SIGKILL. It reports an error
// when the process had to be killed.
func (p *proc) stop(grace time.Duration) error {
	if p.exited() {
		return nil
	}
	p.signal(syscall.SIGTERM)
	if p.wait(grace) {
		return nil
	}
	p.kill()
	return fmt.Errorf("did not exit within %s of SIGTERM; killed", grace)
}

// kill sends SIGKILL and waits for the exit.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}
