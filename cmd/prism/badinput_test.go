package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/internal/dirlock"
	"github.com/prismsbi/prism/nifti"
)

// badCase is one hostile or careless invocation: it must exit with code 1,
// print a message containing every want string, and leave none of the
// paths in absent behind (no partial output); stdout must stay empty.
type badCase struct {
	name   string
	args   []string
	want   []string
	absent []string
}

func (c badCase) check(t *testing.T) {
	t.Helper()
	code, out, errs := prism(c.args...)
	if code != 1 {
		t.Errorf("exit %d, want 1; stderr: %s", code, errs)
	}
	for _, w := range c.want {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr %q lacks %q", errs, w)
		}
	}
	if out != "" {
		t.Errorf("wrote to stdout: %.200s", out)
	}
	for _, p := range c.absent {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("left %s behind", p)
		}
	}
}

// scanVariant copies the ball-and-stick test scan's flags with some of
// its files replaced.
func scanVariant(scan []string, repl map[string]string) []string {
	out := append([]string(nil), scan...)
	for i := 0; i+1 < len(out); i += 2 {
		if v, ok := repl[out[i]]; ok {
			out[i+1] = v
		}
	}
	for k, v := range repl {
		if !containsString(out, k) {
			out = append(out, k, v)
		}
	}
	return out
}

func containsString(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func writeText(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestIssue22BadInput runs every case of issue #22 ("What bad input gets")
// through the command line: uninformative acquisition tables, invalid JSON
// observations, masks on another grid, impossible models, sizes that do
// not fit, busy or stale output folders and corrupt weights.
func TestIssue22BadInput(t *testing.T) {
	dir := t.TempDir()
	scan := writeBallStickScan(t, dir)
	dwi := scan[1]
	n := len(strings.Fields(mustRead(t, scan[3])))
	repeat := func(v string) string { return strings.TrimSpace(strings.Repeat(v+" ", n)) }
	// Tables without diffusion weighting.
	zeroB := writeText(t, filepath.Join(dir, "zero.bval"), repeat("0")+"\n")
	msB := filepath.Join(dir, "ms.bval")
	var msVals []string
	for _, v := range strings.Fields(mustRead(t, scan[3])) {
		var b float64
		fmt.Sscan(v, &b)
		msVals = append(msVals, ftoa(b/1000))
	}
	writeText(t, msB, strings.Join(msVals, " ")+"\n")
	sameDir := writeText(t, filepath.Join(dir, "same.bvec"), repeat("1")+"\n"+repeat("0")+"\n"+repeat("0")+"\n")
	// Masks with the DWI's matrix but another geometry.
	ref, err := nifti.ReadHeader(dwi)
	if err != nil {
		t.Fatal(err)
	}
	mask := func(name string, edit func(h *nifti.Header)) string {
		m, _ := nifti.New(nifti.Uint8, int(ref.Dim[1]), int(ref.Dim[2]), int(ref.Dim[3]))
		for i := range m.Data {
			m.Data[i] = 1
		}
		m.Pixdim = ref.Pixdim
		m.SetSform(ref.VoxelToWorld(), 1)
		edit(&m.Header)
		p := filepath.Join(dir, name)
		if err := nifti.Write(p, m); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shifted := mask("shifted.nii.gz", func(h *nifti.Header) { h.Srow[0][3] += 50 })
	coarse := mask("coarse.nii.gz", func(h *nifti.Header) {
		h.Pixdim[1], h.Pixdim[2], h.Pixdim[3] = 6, 6, 6
		h.Srow[0][0], h.Srow[1][1], h.Srow[2][2] = 6, 6, 6
	})

	var cases []badCase
	for _, cmd := range [][]string{{"dmri", "fit", "--model", "b3s"}, {"dmri", "mcmc"}, {"dmri", "dti"}} {
		out := filepath.Join(dir, "out-"+cmd[1])
		for _, v := range []struct {
			name string
			repl map[string]string
			want []string
		}{
			{"all b = 0", map[string]string{"--bval": zeroB}, []string{"zero.bval", "every volume is a b ≤ 50"}},
			{"b in ms/µm²", map[string]string{"--bval": msB}, []string{"ms.bval", "multiply them by 1000"}},
			{"identical directions", map[string]string{"--bvec": sameDir}, []string{"same.bvec", "along 1 distinct axes"}},
			{"mask shifted 50 mm", map[string]string{"--mask": shifted}, []string{"shifted.nii.gz", "not on the grid", "by 50 mm"}},
			{"mask of 6 mm voxels", map[string]string{"--mask": coarse}, []string{"coarse.nii.gz", "not on the grid", "voxel sizes 6×6×6"}},
		} {
			args := append(append([]string(nil), cmd...), scanVariant(scan, v.repl)...)
			cases = append(cases, badCase{strings.Join(cmd[:2], " ") + ": " + v.name, append(args, "--out", out), v.want, []string{out}})
		}
	}

	// JSON observations of the b3s family with their own table.
	row := func(x, b, g string) string {
		return fmt.Sprintf(`{"x": [%s], "bvals": [%s], "bvecs": [%s]}`+"\n", x, b, g)
	}
	const (
		x7 = "1, 0.5, 0.4, 0.6, 0.45, 0.5, 0.55"
		b7 = "0, 1000, 1000, 1000, 1000, 1000, 1000"
		g7 = "[0,0,0],[1,0,0],[0,1,0],[0,0,1],[0.6,0.8,0],[0,0.6,0.8],[0.8,0,0.6]"
	)
	for _, v := range []struct{ name, line, want string }{
		{"negative b-value", row(x7, "0, -1000, 1000, 1000, 1000, 1000, 1000", g7), "b-value -1000"},
		{"zero b-vector at b > 0", row(x7, b7, "[0,0,0],[0,0,0],[0,1,0],[0,0,1],[0.6,0.8,0],[0,0.6,0.8],[0.8,0,0.6]"), "measurement 2: b = 1000 s/mm² with direction [0 0 0]"},
		{"null in x", row("1, null, 0.4, 0.6, 0.45, 0.5, 0.55", b7, g7), "x[1] is null"},
		{"1e39 in x", row("1, 1e39, 0.4, 0.6, 0.45, 0.5, 0.55", b7, g7), "beyond the float32 range"},
		{"1e30 in x", row("1, 1e30, 0.4, 0.6, 0.45, 0.5, 0.55", b7, g7), "a normalised diffusion signal must be finite"},
		{"all b = 0", row(x7, "0, 0, 0, 0, 0, 0, 0", g7), "every volume is a b ≤ 50"},
	} {
		obs := writeText(t, filepath.Join(dir, strings.ReplaceAll(v.name, " ", "_")+".jsonl"), row(x7, b7, g7)+v.line)
		cases = append(cases, badCase{"sample --obs: " + v.name, []string{"sample", "--model", "b3s", "--obs", obs, "--models", "10", "--params", "2"}, []string{obs + ":2:", v.want}, nil})
	}

	// Impossible models (lingauss-k6: six base components, one noise).
	sim := simFile(t, 2)
	cands := writeText(t, filepath.Join(dir, "cands.txt"), "1000001\n1111110\n")
	cases = append(cases,
		badCase{"select: candidate without a noise model", []string{"select", "--checkpoint", testNet, "--from-simulate", sim, "--lambda", "0.5", "--candidates", cands}, []string{"cands.txt:2", "mask 1111110 is outside the support", "0 noise components"}, nil},
		badCase{"predict --local of the all-zero mask", []string{"predict", "--checkpoint", testNet, "--from-simulate", sim, "--local", "0000000"}, []string{"--local", "mask 0000000 is outside the support"}, nil},
	)

	// Sizes that do not fit.
	bigCfg := writeText(t, filepath.Join(dir, "big.yaml"), "family: lingauss-k6\nbatch_size: 100000000\nsteps: 2\n")
	fracCfg := writeText(t, filepath.Join(dir, "frac.yaml"), "family: lingauss-k6\nsteps: 5.7\n")
	cases = append(cases,
		badCase{"sample --models 2000000000", []string{"sample", "--checkpoint", testNet, "--from-simulate", sim, "--models", "2000000000"}, []string{"--models 2000000000 needs about", "the largest value that fits is about"}, nil},
		badCase{"lambda-sweep --models 2000000000", []string{"lambda-sweep", "--checkpoint", testNet, "--from-simulate", sim, "--models", "2000000000"}, []string{"--models 2000000000 needs about", "the largest value that fits is about"}, nil},
		badCase{"select --discover 2000000000", []string{"select", "--checkpoint", testNet, "--from-simulate", sim, "--lambda", "0.5", "--discover", "2000000000"}, []string{"--discover 2000000000 needs about"}, nil},
		badCase{"eval --n 2000000000", []string{"eval", "--checkpoint", testNet, "--n", "2000000000", "--out", filepath.Join(dir, "eval-big")}, []string{"--n 2000000000 needs about"}, []string{filepath.Join(dir, "eval-big")}},
		badCase{"predict --samples 2000000000", []string{"predict", "--checkpoint", testNet, "--from-simulate", sim, "--samples", "2000000000"}, []string{"--samples 2000000000 needs about"}, nil},
		badCase{"dmri fit --samples 100000000", append(append([]string{"dmri", "fit", "--model", "b3s"}, scan...), "--samples", "100000000", "--out", filepath.Join(dir, "fit-big")), []string{"--samples 100000000 needs about", "the largest value that fits is about"}, []string{filepath.Join(dir, "fit-big")}},
		badCase{"train batch_size: 100000000", []string{"train", "--config", bigCfg, "--out", filepath.Join(dir, "train-big")}, []string{"batch_size 100000000 needs about", "the largest value that fits is about"}, []string{filepath.Join(dir, "train-big")}},
		badCase{"train steps: 5.7", []string{"train", "--config", fracCfg, "--out", filepath.Join(dir, "train-frac")}, []string{"line 2: steps: 5.7 is not an integer"}, []string{filepath.Join(dir, "train-frac")}},
		badCase{"train --lr 0", []string{"train", "--family", "lingauss-k6", "--steps", "2", "--lr", "0", "--out", filepath.Join(dir, "train-lr0")}, []string{"--lr: learning rate 0 must be positive"}, []string{filepath.Join(dir, "train-lr0")}},
		badCase{"train --resume with --lr", []string{"train", "--resume", filepath.Join(dir, "no-run"), "--lr", "1e-4"}, []string{"--lr cannot be combined with --resume"}, nil},
		badCase{"simulate --n beyond the free disk", []string{"simulate", "--family", "b3s", "--n", "2000000000", "--seed", "1", "--out", filepath.Join(dir, "huge.jsonl")}, []string{"--n 2000000000 needs about", "of disk space"}, []string{filepath.Join(dir, "huge.jsonl")}},
		badCase{"demo --slices 1000", []string{"demo", "--out", filepath.Join(dir, "demo"), "--slices", "1000"}, []string{"1000 slices asked for", "give at most"}, []string{filepath.Join(dir, "demo")}},
	)

	// A corrupt checkpoint: one flipped bit in the last weight.
	corrupt := filepath.Join(dir, "corrupt.safetensors")
	w := []byte(mustRead(t, testNet))
	w[len(w)-1] ^= 1
	writeText(t, corrupt, string(w))
	cases = append(cases, badCase{"checkpoint with a flipped bit", []string{"sample", "--checkpoint", corrupt, "--from-simulate", sim}, []string{"corrupt.safetensors", "do not match their checksum"}, nil})

	for _, c := range cases {
		t.Run(c.name, c.check)
	}

	// Folders: one held by another run, one holding an earlier run's maps.
	t.Run("dmri fit into a folder in use", func(t *testing.T) {
		out := filepath.Join(dir, "busy")
		lock, err := dirlock.Acquire(out)
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Release()
		badCase{"", append(append([]string{"dmri", "fit", "--model", "b3s"}, scan...), "--out", out, "--samples", "2", "--steps", "1"),
			[]string{"in use by another process", fmt.Sprintf("process %d", os.Getpid())}, []string{filepath.Join(out, dmrifit.StateFile), filepath.Join(out, "run.json")}}.check(t)
	})
	t.Run("dmri fit into a folder with an earlier run's maps", func(t *testing.T) {
		out := filepath.Join(dir, "stale")
		os.MkdirAll(out, 0o755)
		writeText(t, filepath.Join(out, "run.json"), "{}")
		writeText(t, filepath.Join(out, "ess.nii.gz"), "old")
		args := append(append([]string{"dmri", "fit", "--model", "b3s"}, scan...), "--out", out, "--samples", "2", "--steps", "1", "--quiet")
		badCase{"", args, []string{"holds the output of an earlier run", "--fresh"}, []string{filepath.Join(out, dmrifit.StateFile)}}.check(t)
		if mustRead(t, filepath.Join(out, "ess.nii.gz")) != "old" {
			t.Fatal("the refused run touched ess.nii.gz")
		}
		// --fresh replaces the earlier run: no ess map without --ess-samples.
		if code, _, errs := prism(append(args, "--fresh")...); code != 0 {
			t.Fatalf("--fresh: exit %d: %s", code, errs)
		}
		if _, err := os.Stat(filepath.Join(out, "ess.nii.gz")); !errors.Is(err, os.ErrNotExist) {
			t.Error("--fresh kept the earlier run's ess map")
		}
	})
}

// TestIssue22ImplausibleVoxel: a voxel with 1e30 in one volume is skipped
// and counted (run.json), not fitted.
func TestIssue22ImplausibleVoxel(t *testing.T) {
	dir := t.TempDir()
	scan := writeBallStickScan(t, dir)
	img, err := nifti.Read(scan[1])
	if err != nil {
		t.Fatal(err)
	}
	nx, ny, nz, _ := img.Shape()
	img.Data[7+3*nx*ny*nz] = 1e30
	if err := nifti.Write(scan[1], img); err != nil {
		t.Fatal(err)
	}
	// An all-ones mask keeps both bad voxels in the fit's mask.
	m, _ := nifti.New(nifti.Uint8, nx, ny, nz)
	for i := range m.Data {
		m.Data[i] = 1
	}
	m.Pixdim = img.Pixdim
	maskPath := filepath.Join(dir, "mask.nii.gz")
	if err := nifti.Write(maskPath, m); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "fit")
	if code, _, errs := prism(append(append([]string{"dmri", "fit", "--model", "b3s"}, scan...), "--mask", maskPath, "--out", out, "--samples", "2", "--steps", "1", "--quiet")...); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var run struct {
		Fitted  int            `json:"voxels_fitted"`
		Skipped map[string]int `json:"voxels_skipped"`
	}
	readJSON(t, filepath.Join(out, "run.json"), &run)
	if run.Skipped[dmrifit.SkipImplausible] != 1 || run.Skipped[dmrifit.SkipNonFinite] != 1 || run.Fitted != nx*ny*nz-2 {
		t.Fatalf("%d fitted, skipped %v; want %d fitted, one implausible and one non-finite voxel", run.Fitted, run.Skipped, nx*ny*nz-2)
	}
}

// TestIssue22InterruptRemovesTemporaries interrupts a real `prism
// simulate` child while it writes and checks that it exits with 130 and
// leaves neither the output nor its temporary file.
func TestIssue22InterruptRemovesTemporaries(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "sim.jsonl")
			cmd := exec.Command(os.Args[0], "simulate", "--family", "lingauss-k6", "--n", "5000000", "--seed", "1", "--out", out)
			cmd.Env = append(os.Environ(), asCLI+"=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Wait until the temporary file holds data.
			deadline := time.Now().Add(60 * time.Second)
			for {
				m, _ := filepath.Glob(filepath.Join(dir, ".sim.jsonl.tmp-*"))
				if len(m) == 1 {
					if st, err := os.Stat(m[0]); err == nil && st.Size() > 1<<20 {
						break
					}
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("no temporary file appeared; stderr: %s", stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			var ee *exec.ExitError
			want := 128 + int(sig)
			if !errors.As(err, &ee) || ee.ExitCode() != want {
				t.Fatalf("exit %v, want %d; stderr: %s", err, want, stderr.String())
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 0 {
				t.Errorf("left %v behind", entries)
			}
			if !strings.Contains(stderr.String(), "removed 1 temporary file") {
				t.Errorf("stderr: %s", stderr.String())
			}
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
