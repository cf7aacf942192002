package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/prismsbi/prism/internal/atomicfile"
)

// Name returns the directory name of the checkpoint at step.
func Name(step int64) string { return fmt.Sprintf("%s%012d", Prefix, step) }

// Latest returns the name of the committed checkpoint of run directory
// dir, or "" if there is none.
func Latest(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, LatestFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	name := strings.TrimSpace(string(b))
	if !strings.HasPrefix(name, Prefix) || strings.ContainsAny(name, `/\`) {
		return "", fmt.Errorf("checkpoint: %s: %q is not a checkpoint name", filepath.Join(dir, LatestFile), name)
	}
	return name, nil
}

// IsRunDir reports whether dir holds a committed checkpoint.
func IsRunDir(dir string) bool {
	name, err := Latest(dir)
	return err == nil && name != ""
}

// Commit writes the checkpoint called name into run directory dir: write
// fills a fresh temporary directory (use WriteFile or
// safetensors.Write there, which are atomic), which is fsynced and
// renamed to name, and only then is LATEST replaced, atomically, to point
// at it. A crash at any moment leaves LATEST naming a complete checkpoint,
// the old or the new one. Older checkpoint directories and leftover
// temporaries are removed after the commit. Committing the name LATEST
// already holds does nothing.
func Commit(dir, name string, write func(tmp string) error) error {
	old, err := Latest(dir)
	if err != nil {
		return err
	}
	if old == name {
		return nil
	}
	tmp, err := os.MkdirTemp(dir, "."+name+".tmp-")
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer os.RemoveAll(tmp)       // no-op after the rename
	defer atomicfile.Track(tmp)() // removed if the process is stopped by a signal
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := write(tmp); err != nil {
		return err
	}
	if err := syncDir(tmp); err != nil {
		return err
	}
	final := filepath.Join(dir, name)
	// A directory of this name can only be a leftover of a crash between
	// this rename and the commit below (LATEST names another one).
	if err := os.RemoveAll(final); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	if err := WriteFile(filepath.Join(dir, LatestFile), []byte(name+"\n")); err != nil {
		return err
	}
	return CleanStale(dir, name)
}

// CleanStale removes the checkpoint directories of dir other than keep,
// and the temporaries a crash may have left.
func CleanStale(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	for _, e := range entries {
		n := e.Name()
		stale := (strings.HasPrefix(n, Prefix) && n != keep) ||
			strings.HasPrefix(n, "."+Prefix) || strings.HasPrefix(n, "."+LatestFile+".tmp") ||
			strings.HasPrefix(n, "."+LogFile+".tmp")
		if stale {
			if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
				return fmt.Errorf("checkpoint: removing stale %s: %w", n, err)
			}
		}
	}
	return nil
}

// WriteFile writes data to path atomically (internal/atomicfile), with the
// error naming the path.
func WriteFile(path string, data []byte) error {
	if err := atomicfile.WriteBytes(path, data); err != nil {
		return fmt.Errorf("checkpoint: writing %s: %w", path, err)
	}
	return nil
}

// syncDir fsyncs a directory so that renames in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("checkpoint: syncing %s: %w", dir, err)
	}
	return nil
}
