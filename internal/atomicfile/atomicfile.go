// Package atomicfile writes files so that readers, and a process killed at
// any moment, see either the old content or the complete new file, never a
// partial one: data go to a temporary file in the target directory, which is
// synced and then renamed over the target.
//
// The temporary files being written are registered, so that a program
// stopped by a signal can remove them (RemovePending) before it exits.
package atomicfile

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// pending holds the temporary files being written.
var pending struct {
	sync.Mutex
	files map[string]struct{}
}

// Track registers path as a temporary file (or directory) to be removed by
// RemovePending
// and returns the function that unregisters it (call it once the file is
// renamed or removed). Write tracks its own temporary files; other code
// writing temporaries can use Track too.
func Track(path string) (untrack func()) {
	pending.Lock()
	if pending.files == nil {
		pending.files = map[string]struct{}{}
	}
	pending.files[path] = struct{}{}
	pending.Unlock()
	return func() {
		pending.Lock()
		delete(pending.files, path)
		pending.Unlock()
	}
}

// RemovePending removes every tracked temporary file and returns how many
// it removed. A signal handler calls it before exiting; files being
// written at that moment are removed under the writer, which is what the
// exiting program wants.
func RemovePending() int {
	pending.Lock()
	defer pending.Unlock()
	n := 0
	for p := range pending.files {
		if _, err := os.Lstat(p); err == nil && os.RemoveAll(p) == nil {
			n++
		}
		delete(pending.files, p)
	}
	return n
}

// Write creates path with the bytes produced by write. The temporary file is
// removed when write or any later step fails, and path is left untouched.
// The returned error is not wrapped with path; callers add their own context.
func Write(path string, write func(w *bufio.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	untrack := Track(tmp)
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
		untrack()
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err = write(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	// CreateTemp makes the file private; give the result ordinary permissions.
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	// Make the rename itself durable. Some file systems cannot sync a
	// directory; the content is already safe, so that is not an error.
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// WriteJSON writes v as JSON indented by two spaces, with a final
// newline, to path (Write).
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := WriteBytes(path, append(b, '\n')); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// WriteBytes is Write for data already in memory.
func WriteBytes(path string, data []byte) error {
	return Write(path, func(w *bufio.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
