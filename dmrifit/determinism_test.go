package dmrifit

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestFitBatchAndWorkersInvariance fits a small real scan (DIPY's
// small_25: 26 volumes, so the attention runs the kernels' general path)
// at two batch sizes and with one and two workers (GOMAXPROCS): every
// voxel's random streams depend on its position and the seed only, and the
// network computes every row the same wherever it sits in a batch or row
// chunk, so the maps must be identical byte for byte. (Before the
// attention kernel treated every query alike, 79 of the 3 × 34 map
// comparisons differed here.)
func TestFitBatchAndWorkersInvariance(t *testing.T) {
	const dir = "../../shared/data/dmri/dipy-small/"
	files := ScanFiles{DWI: dir + "small_25.nii.gz", Bval: dir + "small_25.bval", Bvec: dir + "small_25.bvec"}
	if _, err := os.Stat(files.DWI); err != nil {
		t.Skipf("shared data not available: %v", err)
	}
	scan, err := LoadScan(files)
	if err != nil {
		t.Fatal(err)
	}
	if len(scan.Voxels) < 40 {
		t.Fatalf("%d voxels fitted, want several batches", len(scan.Voxels))
	}
	post := randomB3S(t)
	out := t.TempDir()
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	type run struct{ batch, procs int }
	runs := []run{{64, 2}, {64, 1}, {7, 2}, {200, 1}}
	for _, r := range runs {
		runtime.GOMAXPROCS(r.procs)
		// At λ = 0.9 the random network draws the six-token model
		// ball+2 sticks+noise for a few hundred rows per batch: groups of
		// more than 1024 tokens, which DenoiseMasked cuts into row chunks
		// at positions that do not fall on multiples of four queries.
		set := FitSettings{Lambda: 0.9, Samples: 40, Steps: 2, Solver: "ab2", Seed: 5, Mixture: true, BatchSize: r.batch, Correct: "none"}
		cfg := RunConfig{Tool: "test", Out: filepath.Join(out, fmt.Sprintf("b%d-p%d", r.batch, r.procs)), Model: "random"}
		if _, err := Run(context.Background(), scan, post, set, cfg); err != nil {
			t.Fatal(err)
		}
	}
	ref := filepath.Join(out, fmt.Sprintf("b%d-p%d", runs[0].batch, runs[0].procs))
	names, err := OutputFiles(ref)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range runs[1:] {
		other := filepath.Join(out, fmt.Sprintf("b%d-p%d", r.batch, r.procs))
		for _, f := range names {
			if f == "run.json" { // settings (batch size) and timings
				continue
			}
			a, _ := os.ReadFile(filepath.Join(ref, f))
			b, err := os.ReadFile(filepath.Join(other, f))
			if err != nil || !bytes.Equal(a, b) {
				t.Errorf("%s differs between --batch %d at GOMAXPROCS %d and --batch %d at GOMAXPROCS %d (%v)",
					f, runs[0].batch, runs[0].procs, r.batch, r.procs, err)
			}
			n++
		}
	}
	if n < 3*20 {
		t.Errorf("%d maps compared, want the BedpostX layout and the model maps", n)
	}
}
