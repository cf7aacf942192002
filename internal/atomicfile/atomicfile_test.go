package atomicfile

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteReplacesAndCleansUp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	if err := WriteBytes(path, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(path, []byte("second")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "second" {
		t.Fatalf("content %q, %v; want second", got, err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	assertOnly(t, dir, "out.txt")
}

func TestFailedWriteKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	if err := WriteBytes(path, []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, func(w *bufio.Writer) error {
		w.WriteString("partial new content")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	got, _ := os.ReadFile(path)
	if string(got) != "old" {
		t.Fatalf("content %q after failed write, want old", got)
	}
	assertOnly(t, dir, "out.txt")
}

func TestMissingDirectory(t *testing.T) {
	if err := WriteBytes(filepath.Join(t.TempDir(), "no", "such", "f"), nil); err == nil {
		t.Fatal("writing into a missing directory succeeded")
	}
}

func assertOnly(t *testing.T, dir, name string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != name {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %v, want only %s", names, name)
	}
}

// TestRemovePending: a file being written is tracked and RemovePending
// deletes it; a finished write is no longer tracked.
func TestRemovePending(t *testing.T) {
	dir := t.TempDir()
	if err := WriteBytes(filepath.Join(dir, "done.txt"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- Write(filepath.Join(dir, "big.bin"), func(w *bufio.Writer) error {
			w.WriteString("partial")
			w.Flush()
			close(started)
			<-release
			return errors.New("stopped")
		})
	}()
	<-started
	if n := RemovePending(); n != 1 {
		t.Errorf("RemovePending removed %d files, want 1", n)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "done.txt" {
		t.Errorf("left %v, want only done.txt", entries)
	}
	close(release)
	if err := <-errc; err == nil {
		t.Error("the stopped write succeeded")
	}
	if n := RemovePending(); n != 0 {
		t.Errorf("second RemovePending removed %d files", n)
	}
}

// TestWriteJSON: two-space indentation and a final newline (the bytes the
// dMRI, eval, BIDS and demo outputs were written with before they shared
// this writer), and an unencodable value is an error naming the file with
// nothing left behind.
func TestWriteJSON(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	if err := WriteJSON(path, map[string]any{"b": []int{1, 2}, "a": "x"}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"a\": \"x\",\n  \"b\": [\n    1,\n    2\n  ]\n}\n"
	if string(got) != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
	bad := filepath.Join(dir, "bad.json")
	err = WriteJSON(bad, map[string]any{"f": func() {}})
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("unencodable value: error %v, want one naming %s", err, bad)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("unencodable value left %s behind (stat: %v)", bad, err)
	}
}
