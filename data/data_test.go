package data

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/family"
)

// TestCopyTo: every embedded file is written byte-identical to the file
// in this directory, the licence among them.
func TestCopyTo(t *testing.T) {
	dir := t.TempDir()
	if err := CopyTo(dir); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := fs.WalkDir(Files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		src, err := os.ReadFile(filepath.FromSlash(path))
		if err != nil {
			return err
		}
		dst, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path)))
		if err != nil {
			return err
		}
		if !bytes.Equal(src, dst) {
			t.Errorf("%s: copy differs from the repository file", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// README, the two symbolic observations, and the scan's 7 files.
	if n != 10 {
		t.Errorf("%d files embedded, want 10", n)
	}
	lic, err := os.ReadFile(filepath.Join(dir, ScanLicense))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(lic), "BSD 2-Clause") || !strings.Contains(string(lic), "Copyright (c) 2022, Chris Rorden") {
		t.Errorf("licence text lacks the BSD-2-Clause title or the copyright line")
	}
}

// TestScan loads the copied scan with the dMRI pipeline and checks the
// facts its provenance note states: a 72×72×39 grid, 21 volumes of which
// one is b = 0 and 20 are b = 2500, and 48,886 mask voxels.
func TestScan(t *testing.T) {
	dir := t.TempDir()
	if err := CopyTo(dir); err != nil {
		t.Fatal(err)
	}
	p := func(s string) string { return filepath.Join(dir, filepath.FromSlash(s)) }
	s, err := dmrifit.LoadScan(dmrifit.ScanFiles{DWI: p(ScanDWI), Bval: p(ScanBval), Bvec: p(ScanBvec), Mask: p(ScanMask)})
	if err != nil {
		t.Fatal(err)
	}
	if s.Nx != 72 || s.Ny != 72 || s.Nz != 39 || s.Design.N != 21 || s.B0Volumes != 1 {
		t.Errorf("scan %d×%d×%d×%d with %d b0 volumes", s.Nx, s.Ny, s.Nz, s.Design.N, s.B0Volumes)
	}
	if s.MaskCount() != 48886 || s.MaskSource != "file" {
		t.Errorf("mask: %d voxels from %s, want 48886 from the file", s.MaskCount(), s.MaskSource)
	}
	for j := 1; j < s.Design.N; j++ {
		if b := s.Design.Row(j)[0]; b != 2500 {
			t.Errorf("volume %d: b = %v, want 2500", j, b)
		}
	}
}

// TestSymbolicExample: each bundled symbolic observation is one data set
// of its family on the family's grid with a mask the prior allows (one
// noise model), and Example names it.
func TestSymbolicExample(t *testing.T) {
	for _, name := range []string{"symbolic-k15", "symbolic-k50"} {
		checkSymbolicExample(t, name)
	}
	if Example("bszt") != "" {
		t.Errorf("Example(bszt) = %q, want none", Example("bszt"))
	}
}

func checkSymbolicExample(t *testing.T, name string) {
	t.Helper()
	file := Example(name)
	b, err := Files.ReadFile(file)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var line struct {
		X    []float64 `json:"x"`
		Mask []int     `json:"mask"`
	}
	if err := json.Unmarshal(b, &line); err != nil {
		t.Fatal(err)
	}
	f, err := family.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(line.X) != 1000 || len(line.Mask) != len(f.Components()) {
		t.Fatalf("%s: %d values, %d-entry mask", file, len(line.X), len(line.Mask))
	}
	noise := 0
	for k, c := range f.Components() {
		if line.Mask[k] != 0 && c.Kind == family.Noise {
			noise++
		}
	}
	if noise != 1 {
		t.Errorf("%s: mask %v switches on %d noise models, want 1", file, line.Mask, noise)
	}
}
