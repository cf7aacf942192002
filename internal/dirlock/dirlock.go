// Package dirlock takes an advisory, exclusive lock on an output or run
// folder (flock(2) on a file inside it), so that two prism processes
// never write into one folder at once. The lock is released when the
// holder calls Release or exits, however it exits (kill -9 included): the
// kernel drops flock locks with the last open descriptor.
//
// The lock file records the holder's process id, command line and start
// time, so that the error a second process gets names the first.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// FileName is the lock file created in a locked folder. It stays after
// Release (removing it would let a third process lock a different inode);
// readers of a folder ignore it.
const FileName = ".prism.lock"

// ErrLocked is wrapped by Acquire's error when another process holds the
// lock.
var ErrLocked = errors.New("folder in use by another process")

// Lock is a held folder lock.
type Lock struct {
	f   *os.File
	dir string
}

// Acquire creates dir if needed and locks it without waiting. When another
// process holds the lock, the error wraps ErrLocked and says who holds it
// (process id, command, start time).
func Acquire(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w: %s; wait for it to finish (or stop it) or choose another folder", dir, ErrLocked, holder(path))
		}
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	info := fmt.Sprintf("pid %d\ncommand %s\nstarted %s\n", os.Getpid(), strings.Join(os.Args, " "), time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(info), 0)
	}
	return &Lock{f: f, dir: dir}, nil
}

// holder describes the process recorded in the lock file at path.
func holder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return "the holder did not record itself"
	}
	var pid, cmd, started string
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "pid":
			pid = v
		case "command":
			cmd = v
		case "started":
			started = v
		}
	}
	return fmt.Sprintf("process %s (`%s`, started %s) holds %s", pid, cmd, started, path)
}

// Release drops the lock. It is safe to call more than once.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
