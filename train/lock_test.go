package train

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prismsbi/prism/checkpoint"
	"github.com/prismsbi/prism/internal/dirlock"
)

// TestRunFolderLocked: while a trainer holds its run folder, a second
// New, a second Resume of the same run and a fork into the same output
// fail with an error naming the holder, and the run's log is untouched;
// after Close the run resumes.
func TestRunFolderLocked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	tr := newTrainer(t, tinyConfig(t, 3), dir)
	log, err := os.ReadFile(filepath.Join(dir, checkpoint.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	fork := filepath.Join(t.TempDir(), "fork")
	ft, err := Resume(dir, fork, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"resume the same run", func() error { _, err := Resume(dir, "", nil, Options{}); return err }},
		{"resume into the same folder by name", func() error { _, err := Resume(dir, dir, nil, Options{}); return err }},
	} {
		err := tc.run()
		if !errors.Is(err, dirlock.ErrLocked) || !strings.Contains(err.Error(), "process ") {
			t.Errorf("%s: err = %v, want one saying which process holds the folder", tc.name, err)
		}
	}
	ft.Close()
	if after, _ := os.ReadFile(filepath.Join(dir, checkpoint.LogFile)); string(after) != string(log) {
		t.Errorf("the refused runs changed %s", checkpoint.LogFile)
	}
	tr.Close()
	rt, err := Resume(dir, "", nil, Options{})
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	rt.Close()
}
