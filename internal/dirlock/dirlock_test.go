package dirlock

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLockExcludesOtherProcesses runs a second process (this test binary
// re-executed) that tries to lock a folder this process holds, then again
// after the release. flock locks are per open file description, so a
// second Acquire in the same process would also fail; a separate process
// is the case that matters.
func TestLockExcludesOtherProcesses(t *testing.T) {
	if dir := os.Getenv("DIRLOCK_CHILD"); dir != "" {
		if _, err := Acquire(dir); err != nil {
			fmt.Print(err)
			os.Exit(3)
		}
		os.Exit(0) // without Release: exiting drops the lock
	}
	dir := filepath.Join(t.TempDir(), "out")
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	child := func() (int, string) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLockExcludesOtherProcesses$")
		cmd.Env = append(os.Environ(), "DIRLOCK_CHILD="+dir)
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	code, msg := child()
	if code != 3 || !strings.Contains(msg, fmt.Sprintf("process %d", os.Getpid())) || !strings.Contains(msg, "in use by another process") {
		t.Fatalf("while locked: child exit %d, %q; want 3 and a message naming process %d", code, msg, os.Getpid())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if code, msg := child(); code != 0 {
		t.Fatalf("after release: child exit %d, %q", code, msg)
	}
	// The child exited holding the lock; the kernel dropped it.
	l, err = Acquire(dir)
	if err != nil {
		t.Fatalf("after the child's exit: %v", err)
	}
	l.Release()
}
