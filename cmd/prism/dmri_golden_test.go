package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prismsbi/prism/engine/kernels"
	"github.com/prismsbi/prism/internal/dirlock"
)

// goldenFile holds, per kernel path (avx512, avx2, generic, go), per case,
// the SHA-256 of every file the dMRI commands write. The kernel paths
// differ in the last bits of their floating-point results (docs/engine.md),
// so each has its own set. Regenerate with
//
//	PRISM_UPDATE_GOLDEN=1 go test ./cmd/prism -run TestDMRIGolden
//
// (and once per path: PRISM_KERNELS=avx2, generic; CGO_ENABLED=0 for go),
// but only when a change of the outputs is intended.
const goldenFile = "testdata/dmri-golden.json"

// goldenCase is one command line whose outputs are pinned; {in} is
// replaced by the cropped scan's input flags ({in-small}: a 2-voxel crop), {out} by the output folder,
// {bszt} by the tiny bszt checkpoint.
type goldenCase struct {
	name string
	args []string
	// stdout: also pin what the command prints on stdout.
	stdout bool
	// trainedHere: the network is the tiny bszt trained by the test. Its
	// weights_sha256 in run.json is left out: training's matrix products
	// go through OpenBLAS, which picks its kernels by CPU model (Cooperlake
	// on an AVX-512 BF16 machine, SkylakeX or Zen elsewhere), so the last
	// bits of the weights — and their hash — differ between machines of
	// one kernel path, while the maps it writes did not (session 11).
	trainedHere bool
}

var goldenCases = []goldenCase{
	{name: "fit-b3s", args: []string{"dmri", "fit", "{in}", "--model", "b3s-brain", "--samples", "12", "--steps", "4", "--quiet", "--out", "{out}"}},
	{name: "fit-b3s-options", args: []string{"dmri", "fit", "{in}", "--model", "b3s-brain", "--samples", "6", "--steps", "3", "--solver", "heun",
		"--lambda", "0.5", "--mixture", "--seed", "7", "--batch", "50", "--quiet", "--out", "{out}"}},
	// The likelihood correction and the ESS cost seconds per voxel: 2 voxels.
	{name: "fit-b3s-correct", args: []string{"dmri", "fit", "{in-small}", "--model", "b3s-brain", "--samples", "4", "--steps", "2",
		"--correct", "smc", "--correct-particles", "16", "--ess-samples", "4", "--quiet", "--out", "{out}"}},
	// The network's fit without the default correction (--refine 3).
	{name: "fit-b3s-refine", args: []string{"dmri", "fit", "{in}", "--model", "b3s-brain", "--samples", "12", "--steps", "4", "--correct", "none", "--quiet", "--out", "{out}"}},
	{name: "fit-select", trainedHere: true, args: []string{"dmri", "fit", "{in}", "--checkpoint", "{bszt}", "--samples", "4", "--steps", "3", "--quiet", "--out", "{out}"}},
	{name: "dti", args: []string{"dmri", "dti", "{in}", "--out", "{out}"}},
	{name: "mcmc", args: []string{"dmri", "mcmc", "{in}", "--fibres", "2", "--burnin", "40", "--jumps", "40", "--sample-every", "4", "--workers", "1", "--out", "{out}"}},
	{name: "loocv", args: []string{"dmri", "loocv", "{in}", "--model", "b3s-brain", "--volumes", "2", "--samples", "4", "--steps", "2", "--quiet", "--out", "{out}"}},
	{name: "compare", args: []string{"dmri", "compare", "{out}/../fit-b3s", "{out}/../mcmc", "--out", "{out}"}, stdout: true},
	{name: "crossing", args: []string{"dmri", "crossing", "--model", "b3s-brain", "--voxels", "2", "--samples", "4", "--steps", "2", "--angles", "60", "--snr", "20",
		"--protocols", "shell20", "--json", "{out}/crossing.json"}, stdout: true},
}

// TestDMRIGolden pins the bytes every dMRI command writes for fixed seeds
// on a 10×10×2 crop of the bundled scan (the shipped b3s-brain network;
// a tiny bszt network trained for three steps for the model-selection
// fit): a refactoring must leave them unchanged. run.json is compared
// without what differs between any two runs (timings, start time,
// version, worker count, temporary paths).
func TestDMRIGolden(t *testing.T) {
	if _, err := os.Stat(bundledScanDir); err != nil {
		t.Skipf("bundled scan not available: %v", err)
	}
	path := kernels.Path()
	update := os.Getenv("PRISM_UPDATE_GOLDEN") != ""
	all := map[string]map[string]map[string]string{}
	if b, err := os.ReadFile(goldenFile); err == nil {
		if err := json.Unmarshal(b, &all); err != nil {
			t.Fatalf("%s: %v", goldenFile, err)
		}
	} else if !update {
		t.Fatal(err)
	}
	want, ok := all[path]
	if !ok && !update {
		t.Skipf("%s has no golden hashes for the kernel path %s (record them with PRISM_UPDATE_GOLDEN=1)", goldenFile, path)
	}

	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	in := cropBundled(t, filepath.Join(dir, "in"), cropBlock{X0: 36, Y0: 40, Z0: 20, Nx: 10, Ny: 10, Nz: 2})
	if err := os.Mkdir(filepath.Join(dir, "small"), 0o755); err != nil {
		t.Fatal(err)
	}
	small := cropBundled(t, filepath.Join(dir, "small"), cropBlock{X0: 40, Y0: 44, Z0: 20, Nx: 2, Ny: 1, Nz: 1})
	bszt := tinyBSZT(t)
	// The temporary folders in JSON files and on stdout.
	tmp := strings.NewReplacer(dir, "$DIR", bszt, "$BSZT")
	got := map[string]map[string]string{}
	for _, c := range goldenCases {
		out := filepath.Join(dir, c.name)
		var args []string
		for _, a := range c.args {
			switch a {
			case "{in}":
				args = append(args, in...)
				continue
			case "{in-small}":
				args = append(args, small...)
				continue
			}
			args = append(args, strings.NewReplacer("{out}", out, "{bszt}", bszt).Replace(a))
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		code, stdout, stderr := prism(args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, stderr)
		}
		t.Logf("%s: %.1f s", c.name, time.Since(t0).Seconds())
		h := hashFolder(t, out, tmp, c.trainedHere)
		if c.stdout {
			h["(stdout)"] = sha([]byte(tmp.Replace(stdout)))
		}
		got[c.name] = h
	}
	if update {
		all[path] = got
		b, err := json.MarshalIndent(all, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded the golden hashes of kernel path %s in %s", path, goldenFile)
		return
	}
	for _, c := range goldenCases {
		w, g := want[c.name], got[c.name]
		if len(w) == 0 {
			t.Errorf("%s: no golden hashes for path %s", c.name, path)
		}
		for f, hw := range w {
			if hg, ok := g[f]; !ok {
				t.Errorf("%s: %s not written", c.name, f)
			} else if hg != hw {
				t.Errorf("%s: %s differs from its golden bytes (kernel path %s)", c.name, f, path)
			}
		}
		for f := range g {
			if _, ok := w[f]; !ok {
				t.Errorf("%s: unexpected output %s", c.name, f)
			}
		}
	}
}

// hashFolder returns the SHA-256 of every file under dir but the folder
// lock; run.json is hashed after normalisation (normRunJSON), and tmp
// replaces the temporary folders in JSON files.
func hashFolder(t *testing.T, dir string, tmp *strings.Replacer, trainedHere bool) map[string]string {
	t.Helper()
	h := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == dirlock.FileName {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.HasSuffix(p, ".json") {
			if d.Name() == "run.json" {
				b = normRunJSON(t, b, trainedHere)
			}
			b = []byte(tmp.Replace(string(b)))
		}
		h[rel] = sha(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// volatileRunKeys are the run.json fields that differ between two runs of
// the same command.
var volatileRunKeys = []string{"timings_s", "started", "version", "go_version", "workers", "voxels_per_second"}

// normRunJSON drops the volatile fields of run.json (and, for a network
// trained by the test, settings.weights_sha256) and re-encodes it with
// sorted keys.
func normRunJSON(t *testing.T, b []byte, trainedHere bool) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("run.json: %v", err)
	}
	for _, k := range volatileRunKeys {
		delete(m, k)
	}
	if set, ok := m["settings"].(map[string]any); ok && trainedHere {
		delete(set, "weights_sha256")
	}
	out, err := json.Marshal(m) // encoding/json sorts map keys
	if err != nil {
		t.Fatal(err)
	}
	return out
}
