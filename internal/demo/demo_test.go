package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/nifti"
)

func TestSlab(t *testing.T) {
	for _, c := range []struct{ nz, n, z0, z1 int }{
		{39, 2, 18, 20}, {39, 1, 19, 20}, {39, 3, 18, 21}, {39, 0, 0, 39}, {39, 39, 0, 39}, {39, 100, 0, 39}, {4, 2, 1, 3},
	} {
		if z0, z1 := slab(c.nz, c.n); z0 != c.z0 || z1 != c.z1 {
			t.Errorf("slab(%d, %d) = [%d, %d), want [%d, %d)", c.nz, c.n, z0, z1, c.z0, c.z1)
		}
	}
}

// TestRestrictToSlab: on a 2×2×4 grid whose signals encode their voxel
// index, the slab [1, 3) keeps voxels 4…11 with their own signals, and the
// mask keeps exactly them.
func TestRestrictToSlab(t *testing.T) {
	const n = 3
	s := &dmrifit.Scan{Nx: 2, Ny: 2, Nz: 4, Design: family.Design{N: n}, Mask: make([]bool, 16)}
	for i := range 16 {
		if i == 6 { // a mask voxel skipped by the checks
			s.Mask[i] = true
			continue
		}
		s.Mask[i] = true
		s.Voxels = append(s.Voxels, i)
		for j := range n {
			s.Signal = append(s.Signal, float64(10*i+j))
		}
	}
	restrictToSlab(s, 1, 3)
	if want := []int{4, 5, 7, 8, 9, 10, 11}; !slices.Equal(s.Voxels, want) {
		t.Fatalf("voxels %v, want %v", s.Voxels, want)
	}
	for v, i := range s.Voxels {
		for j := range n {
			if s.Signal[v*n+j] != float64(10*i+j) {
				t.Errorf("voxel %d signal %d = %v", i, j, s.Signal[v*n+j])
			}
		}
	}
	for i, m := range s.Mask {
		if m != (i >= 4 && i < 12) {
			t.Errorf("mask[%d] = %v", i, m)
		}
	}
}

func TestPercentile(t *testing.T) {
	v := []float64{math.NaN(), 5, 1, math.Inf(1), 3, 2, 4}
	if p := percentile(v, 0.5); p != 3 {
		t.Errorf("median of 1…5 = %v", p)
	}
	if p := percentile(v, 0.99); p != 5 {
		t.Errorf("99th percentile of 1…5 = %v", p)
	}
	if p := percentile([]float64{math.NaN()}, 0.5); !math.IsNaN(p) {
		t.Errorf("percentile of no finite value = %v", p)
	}
}

func TestValidate(t *testing.T) {
	good := DefaultConfig(true)
	good.Out = "x"
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Out = "" }, "output directory"},
		{func(c *Config) { c.Slices = -1 }, "slices"},
		{func(c *Config) { c.Lambdas = nil }, "empty λ grid"},
		{func(c *Config) { c.Lambdas = []float64{0.5, 0.2} }, "increasing"},
		{func(c *Config) { c.Lambdas = []float64{0.5, 1.5} }, "increasing"},
		{func(c *Config) { c.SweepMasks = 0 }, "sweep masks"},
		{func(c *Config) { c.PredictLambda = -1 }, "predictive λ"},
		{func(c *Config) { c.Fit.Samples = 0 }, "samples per voxel"},
	} {
		cfg := good
		cfg.Lambdas = slices.Clone(good.Lambdas)
		c.edit(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
}

// tinyConfig is a demo small enough for a unit test: one slice, two
// samples of two steps per voxel, a two-point sweep.
func tinyConfig(out string) Config {
	c := DefaultConfig(true)
	c.Out, c.Slices = out, 1
	c.Fit.Samples, c.Fit.Steps, c.Fit.BatchSize = 2, 2, 1024
	c.Lambdas = []float64{0.2, 0.8}
	c.SweepMasks, c.PredictSamples, c.Steps = 20, 10, 4
	return c
}

// TestRun runs a tiny demo and checks its outputs against each other: the
// report's images exist and decode, the fibre-count summary equals the
// arg-max of nfibres_prob read back from disk, probabilities sum to 1
// inside the slab and vanish outside, and the JSON files are complete.
func TestRun(t *testing.T) {
	out := t.TempDir()
	c := tinyConfig(out)
	calls := 0
	c.FitProgress = func(done, total int) { calls++ }
	s, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if calls < 2 {
		t.Errorf("fit progress called %d times", calls)
	}

	html, err := os.ReadFile(filepath.Join(out, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	srcs := regexp.MustCompile(`<img src="([^"]+)"`).FindAllStringSubmatch(string(html), -1)
	if len(srcs) != 6 || !strings.Contains(string(html), `data-total="6"`) {
		t.Errorf("report has %d images (want 6): %q", len(srcs), srcs)
	}
	for _, m := range srcs {
		fh, err := os.Open(filepath.Join(out, filepath.FromSlash(m[1])))
		if err != nil {
			t.Error(err)
			continue
		}
		if _, err := png.Decode(fh); err != nil {
			t.Errorf("%s: %v", m[1], err)
		}
		fh.Close()
	}

	d := s.DMRI
	if d.Slab != [2]int{19, 20} || d.Slice != 19 || d.Fitted == 0 || d.InMask != 48886 {
		t.Fatalf("dMRI summary: %+v", d)
	}
	nf, err := nifti.Read(filepath.Join(out, dmriDir, "nfibres_prob"+dmrifit.OutputExt))
	if err != nil {
		t.Fatal(err)
	}
	nx, ny, nz, nk := nf.Shape()
	plane, nv := nx*ny, nx*ny*nz
	counts := make([]float64, nk)
	fitted := 0
	for i := range nv {
		var sum float64
		best := 0
		for k := range nk {
			sum += float64(nf.Data[k*nv+i])
			if nf.Data[k*nv+i] > nf.Data[best*nv+i] {
				best = k
			}
		}
		if sum == 0 {
			continue
		}
		// float32 probabilities of ≤ 4 terms: 1e-5.
		if z := i / plane; z != 19 || math.Abs(sum-1) > 1e-5 {
			t.Fatalf("voxel %d (slice %d): probabilities sum to %v", i, z, sum)
		}
		fitted++
		counts[best]++
	}
	if fitted != d.Fitted {
		t.Errorf("%d voxels with probabilities, %d fitted", fitted, d.Fitted)
	}
	for k := range counts {
		if math.Abs(counts[k]/float64(fitted)-d.NFibres[k]) > 1e-12 {
			t.Errorf("MAP fibre count %d: fraction %v, from the file %v", k, d.NFibres[k], counts[k]/float64(fitted))
		}
	}

	var sweep []SweepPoint
	readJSON(t, filepath.Join(out, symbolicDir, "sweep.json"), &sweep)
	if len(sweep) != 2 || sweep[0].Lambda != 0.2 || sweep[1].Lambda != 0.8 {
		t.Fatalf("sweep: %+v", sweep)
	}
	for _, pt := range sweep {
		if len(pt.Top) == 0 || !(pt.ActiveQ05 <= pt.ActiveMedian && pt.ActiveMedian <= pt.ActiveQ95) {
			t.Errorf("sweep point %+v", pt)
		}
		for i, m := range pt.Top {
			if !(m.Prob > 0 && m.Prob <= 1) || (i > 0 && m.Prob > pt.Top[i-1].Prob) {
				t.Errorf("λ %v: ranked models %+v", pt.Lambda, pt.Top)
			}
		}
	}
	var pred struct {
		X, Y, Mean, Lo, Hi []float64
	}
	readJSON(t, filepath.Join(out, symbolicDir, "predict.json"), &pred)
	if len(pred.X) != 1000 || len(pred.Y) != 1000 || len(pred.Mean) != 1000 || len(pred.Lo) != 1000 || len(pred.Hi) != 1000 {
		t.Fatalf("predict.json: %d x, %d y, %d mean", len(pred.X), len(pred.Y), len(pred.Mean))
	}
	for j := range pred.X {
		if !(pred.Lo[j] <= pred.Hi[j]) || (j > 0 && !(pred.X[j] > pred.X[j-1])) {
			t.Fatalf("predict.json point %d: x %v, band [%v, %v]", j, pred.X[j], pred.Lo[j], pred.Hi[j])
		}
	}
	var sum Summary
	readJSON(t, filepath.Join(out, SummaryFile), &sum)
	if sum.Models["b3s"].SHA256 == "" || sum.Symbolic.TrueModel != "Sinusoidal+TanhLeft+GaussianWide+NoiseQuadraticDecreasing" {
		t.Errorf("summary.json: models %v, truth %q", sum.Models, sum.Symbolic.TrueModel)
	}
	if _, err := os.Stat(filepath.Join(out, dataDir, "xa30-prisma-b2500-wholebrain", "LICENSE")); err != nil {
		t.Errorf("the scan's licence was not copied: %v", err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestRunCancelled: a cancelled context stops the fit with its error and
// writes no report.
func TestRunCancelled(t *testing.T) {
	out := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, tinyConfig(out)); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(out, ReportFile)); err == nil {
		t.Error("a cancelled run wrote the report")
	}
}

// TestRunRefusesTooManySlices: more slices than the bundled scan has is an
// error naming the largest valid value, and nothing is written.
func TestRunRefusesTooManySlices(t *testing.T) {
	nz, err := scanSlices()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "demo")
	c := tinyConfig(out)
	c.Slices = 1000
	_, err = Run(context.Background(), c)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("give at most %d", nz)) {
		t.Fatalf("err = %v, want one naming %d slices", err, nz)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the refused run created %s", out)
	}
}
