package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// adminSocket is the Unix socket of the admin listener, with the lock that
// tells a live daemon from a socket file a killed one left behind.
//
// The lock is PATH.lock, held (flock) for the daemon's life: the kernel
// releases it when the process ends, however it ends. A daemon that cannot
// take it refuses to start, since another daemon serves the socket; one
// that takes it removes a socket file left at PATH (its daemon is gone)
// and listens there. The socket is made mode 0600, so that only the
// daemon's user and root can connect.
type adminSocket struct {
	path string
	lock *os.File
	log  *slog.Logger
	// serve starts serving a listener (start); refresh calls it with a
	// new one.
	serve func(net.Listener)
	stop  chan struct{}
	done  chan struct{}

	mu   sync.Mutex
	ln   *net.UnixListener
	file os.FileInfo // the socket file, to tell it from a replacement
}

// socketRefresh is how often the daemon touches its socket and lock files,
// so that a cleaner of old files in /tmp (systemd-tmpfiles) leaves them,
// and makes the socket again if it was removed.
var socketRefresh = time.Hour

// listenAdminSocket takes the lock of path and listens on it. private says
// that the directory belongs to cdcsync (the default socket): it is created
// with mode 0700 and refused when another user owns it or others may write
// to it (in a shared /tmp, someone else could have made it).
func listenAdminSocket(path string, private bool, pipeline string, log *slog.Logger) (*adminSocket, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the directory of the admin socket: %w; set admin.listen to a socket path in a directory the daemon may write, or off", err)
	}
	if private {
		if err := checkPrivateDir(dir); err != nil {
			return nil, err
		}
	}
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the lock file of the admin socket: %w; set admin.listen to a socket path in a directory the daemon may write, or off", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another cdcsync daemon serves the admin socket %s: pipeline %q is running already on this machine; "+
				"stop that daemon first, or, if this one is another pipeline, give it its own pipeline name or admin.listen", path, pipeline)
		}
		return nil, fmt.Errorf("lock the admin socket %s: %w", path, err)
	}
	s := &adminSocket{path: path, lock: lock, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	if err := s.listen(); err != nil {
		lock.Close()
		return nil, err
	}
	return s, nil
}

// start serves the socket with serve, and again whenever refresh makes it
// anew, until close.
func (s *adminSocket) start(serve func(net.Listener)) {
	s.serve = serve
	serve(s.listener())
	go s.keep()
}

// checkPrivateDir refuses a socket directory that another user owns or
// that others may write to.
func checkPrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("the directory of the admin socket: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s, the directory of the admin socket, is not a directory (a symbolic link?): remove it, or set admin.listen to another socket path", dir)
	case ok && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s, the directory of the admin socket, belongs to user id %d, not to this user (%d): remove it, or set admin.listen to a socket path in a directory of your own", dir, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s, the directory of the admin socket, has mode %04o: others may enter it; run chmod 700 %s, or remove it (cdcsync creates it with mode 0700)", dir, fi.Mode().Perm(), dir)
	}
	return nil
}

// listen removes a stale socket file at s.path (the lock is held, so no
// daemon serves it) and listens there.
func (s *adminSocket) listen() error {
	if fi, err := os.Lstat(s.path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return fmt.Errorf("%s exists and is not a socket: remove it, or set admin.listen to another path", s.path)
		}
		if err := os.Remove(s.path); err != nil {
			return fmt.Errorf("remove the admin socket a stopped daemon left at %s: %w", s.path, err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: s.path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("listen on the admin socket %s: %w; set admin.listen to another socket path, or off", s.path, err)
	}
	// Removed by close, and only while it is still this socket.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(s.path, 0o600); err != nil {
		ln.Close()
		os.Remove(s.path)
		return fmt.Errorf("make the admin socket %s private: %w", s.path, err)
	}
	fi, err := os.Lstat(s.path)
	if err != nil {
		ln.Close()
		return fmt.Errorf("the admin socket %s: %w", s.path, err)
	}
	s.mu.Lock()
	s.ln, s.file = ln, fi
	s.mu.Unlock()
	return nil
}

func (s *adminSocket) listener() net.Listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ln
}

// keep refreshes the socket every socketRefresh until close.
func (s *adminSocket) keep() {
	defer close(s.done)
	t := time.NewTicker(socketRefresh)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.refresh()
		}
	}
}

// refresh touches the socket and lock files, or makes the socket again
// when its file was removed or replaced.
func (s *adminSocket) refresh() {
	now := time.Now()
	_ = os.Chtimes(s.path+".lock", now, now)
	_ = os.Chtimes(filepath.Dir(s.path), now, now)
	s.mu.Lock()
	old, file := s.ln, s.file
	s.mu.Unlock()
	if fi, err := os.Lstat(s.path); err == nil && os.SameFile(fi, file) {
		_ = os.Chtimes(s.path, now, now)
		return
	}
	s.log.Warn("the admin socket was removed (a cleaner of old files?); making it again", "path", s.path)
	if err := s.listen(); err != nil {
		s.log.Error("cannot make the admin socket again; cdcsync resync will not reach this daemon until it restarts", "error", err)
		return
	}
	old.Close()
	s.serve(s.listener())
}

// close stops the refreshes, closes the listener, removes the socket file
// while it is still this one, and releases the lock.
func (s *adminSocket) close() {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	ln, file := s.ln, s.file
	s.mu.Unlock()
	ln.Close()
	if fi, err := os.Lstat(s.path); err == nil && os.SameFile(fi, file) {
		os.Remove(s.path)
	}
	s.lock.Close()
}
