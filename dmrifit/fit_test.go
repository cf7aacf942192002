package dmrifit

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/family"
	fdmri "github.com/prismsbi/prism/family/dmri"
)

// TestModelListB3S: b3s has 15 models (non-empty subsets of the four
// compartments, noise on), numbered 1..15 in binary order, with their
// stick counts: C(3,k) models with k sticks and the ball, plus C(3,k)
// without it for k ≥ 1.
func TestModelListB3S(t *testing.T) {
	ms, err := ModelList(fdmri.B3S(), 0.3)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 15 {
		t.Fatalf("%d models, want 15", len(ms))
	}
	count := map[int]int{}
	for k, m := range ms {
		if m.Index != k+1 || !m.Mask[4] || !strings.HasSuffix(m.Name, "GaussianNoise") {
			t.Errorf("model %d: %+v", k, m)
		}
		s := 0
		for c := 1; c <= 3; c++ {
			if m.Mask[c] {
				s++
			}
		}
		if s != m.Sticks {
			t.Errorf("model %s: %d sticks, mask says %d", m.Name, m.Sticks, s)
		}
		count[m.Sticks]++
	}
	if count[0] != 1 || count[1] != 6 || count[2] != 6 || count[3] != 2 {
		t.Errorf("models by stick count %v, want 0:1 1:6 2:6 3:2", count)
	}
	if ms[0].Name != "MultiShellBall+GaussianNoise" {
		t.Errorf("first model %q", ms[0].Name)
	}
}

// TestDrawCategorical: normalise turns log q into probabilities, and
// the draws follow them: each frequency over n = 200,000 draws lies
// within 5 binomial standard errors √(p(1−p)/n) of p.
func TestDrawCategorical(t *testing.T) {
	lq := []float64{-1000.5, -1001, -1003, math.Inf(-1), -1000}
	p := make([]float32, len(lq))
	mass := normalise(lq, p)
	var want [5]float64
	var z float64
	for m, v := range lq {
		want[m] = math.Exp(v + 1000)
		z += want[m]
	}
	for m := range want {
		want[m] /= z
		if math.Abs(float64(p[m])-want[m]) > 1e-7 {
			t.Errorf("p[%d] = %v, want %v", m, p[m], want[m])
		}
	}
	if mass != 0 {
		t.Errorf("mass %v, want 0 (underflow of e^-1000)", mass)
	}
	q := make([]float32, len(lq))
	small := []float64{-0.5, -1, -3, math.Inf(-1), 0}
	if mass := normalise(small, q); math.Abs(mass-z) > 1e-12*z {
		t.Errorf("mass %v, want %v", mass, z)
	}
	for m := range q {
		if q[m] != p[m] {
			t.Errorf("shifting log q by 1000 changed p[%d]: %v vs %v", m, q[m], p[m])
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	const n = 200000
	var got [5]float64
	for range n {
		got[drawCategorical(r, p)]++
	}
	for m := range got {
		f := got[m] / n
		se := math.Sqrt(want[m] * (1 - want[m]) / n)
		if math.Abs(f-want[m]) > 5*se+1e-12 {
			t.Errorf("model %d drawn with frequency %v, want %v ± %v", m, f, want[m], 5*se)
		}
	}
}

// TestPeakDirection: with an identity rotation the FSL flip negates x;
// with a rotation by 90° about z the voxel x axis goes to world y.
func TestPeakDirection(t *testing.T) {
	id := [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}
	d := [3]float64{0.6, 0, 0.8}
	if w := PeakDirection(d, true, id); w != [3]float64{-0.6, 0, 0.8} {
		t.Errorf("flip: %v", w)
	}
	if w := PeakDirection(d, false, id); w != d {
		t.Errorf("no flip: %v", w)
	}
	rz := [3][3]float64{{0, -1, 0}, {1, 0, 0}, {0, 0, 1}}
	w := PeakDirection([3]float64{1, 0, 0}, false, rz)
	if math.Abs(w[0]) > 1e-15 || math.Abs(w[1]-1) > 1e-15 || w[2] != 0 {
		t.Errorf("rotation: %v", w)
	}
}

// TestDyadActive: samples in which the stick is absent do not enter the
// dyad; with none present the dyad is zero and the dispersion 1.
func TestDyadActive(t *testing.T) {
	p, _ := NewStickSamples([]int{0, 1}, 1, 4)
	p.Active[0] = make([]bool, 8)
	// Voxel 0: two present samples along z, two absent ones along x.
	for s, th := range []float32{0, 0, math.Pi / 2, math.Pi / 2} {
		p.Theta[0][s] = th
		p.Active[0][s] = s < 2
	}
	dir, disp := p.Dyad(0, 0)
	if math.Abs(dir[2]-1) > 1e-12 || disp > 1e-12 {
		t.Errorf("dyad %v, dispersion %v; want z, 0", dir, disp)
	}
	if dir, disp = p.Dyad(0, 1); dir != [3]float64{} || disp != 1 {
		t.Errorf("no present sample: dyad %v, dispersion %v", dir, disp)
	}
}

// TestFitStateRoundTrip: records survive a reopen bit for bit, a torn
// record and garbage after it are cut off, appending continues where
// the good records end, and another key is refused unless fresh.
func TestFitStateRoundTrip(t *testing.T) {
	sh := ResultShape{Samples: 3, Models: 4, Sticks: 2}
	path := filepath.Join(t.TempDir(), StateFile)
	key := []byte(`{"a":1}`)
	st, err := OpenFitState(path, key, sh, false)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 3))
	fill := func(start, n int) *Result {
		b := newBatch(start, n, sh.Samples, sh.Models, sh.Sticks)
		for _, a := range b.arrays() {
			for k := range a {
				a[k] = float32(r.NormFloat64())
			}
		}
		for i := range sh.Sticks {
			for k := range b.Active[i] {
				b.Active[i][k] = r.IntN(2) == 1
			}
		}
		return b
	}
	b0, b1 := fill(0, 2), fill(2, 3)
	for _, b := range []*Result{b0, b1} {
		if err := st.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Append(fill(7, 1)); err == nil {
		t.Error("a batch that does not continue the state was accepted")
	}
	st.Close()
	good, _ := os.Stat(path)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	torn := fill(5, 2).marshal()
	f.Write([]byte{0x50, 0x46, 0x54, 0x42, 5, 0, 0, 0, 2, 0, 0, 0})
	f.Write(torn[:len(torn)/2])
	f.Close()

	st, err = OpenFitState(path, key, sh, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.Done() != 5 || len(st.Batches) != 2 {
		t.Fatalf("reopened: %d voxels in %d batches, want 5 in 2", st.Done(), len(st.Batches))
	}
	if fi, _ := os.Stat(path); fi.Size() != good.Size() {
		t.Errorf("torn record not cut: %d bytes, want %d", fi.Size(), good.Size())
	}
	for k, want := range []*Result{b0, b1} {
		got := st.Batches[k]
		ga, wa := got.arrays(), want.arrays()
		for a := range wa {
			for i := range wa[a] {
				if math.Float32bits(ga[a][i]) != math.Float32bits(wa[a][i]) {
					t.Fatalf("batch %d array %d value %d: %v, want %v", k, a, i, ga[a][i], wa[a][i])
				}
			}
		}
		for i := range sh.Sticks {
			for j := range want.Active[i] {
				if got.Active[i][j] != want.Active[i][j] {
					t.Fatalf("batch %d stick %d active[%d] differs", k, i, j)
				}
			}
		}
	}
	if err := st.Append(fill(5, 1)); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = OpenFitState(path, key, sh, false)
	if err != nil || st.Done() != 6 {
		t.Fatalf("after appending: %v, %d voxels", err, st.Done())
	}
	st.Close()
	if _, err := OpenFitState(path, []byte(`{"a":2}`), sh, false); err == nil || !strings.Contains(err.Error(), "different run") {
		t.Errorf("another key: %v", err)
	}
	st, err = OpenFitState(path, []byte(`{"a":2}`), sh, true)
	if err != nil || st.Done() != 0 {
		t.Fatalf("fresh: %v, %d voxels", err, st.Done())
	}
	st.Close()
}

// TestModelPosteriorMatchesFitBatch: ModelPosterior gives FitBatch's
// model probabilities and masses for the same voxels (the same network
// pass; only the parameter samples are skipped).
func TestModelPosteriorMatchesFitBatch(t *testing.T) {
	files := slabFiles(t)
	s, err := LoadScan(files)
	if err != nil {
		t.Fatal(err)
	}
	ft, err := NewFitter(randomB3S(t), FitSettings{Lambda: 0.4, Samples: 2, Steps: 2, Solver: "ab2", Seed: 3, BatchSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	const start, n = 40, 24
	b, err := ft.FitBatch(s, start, n)
	if err != nil {
		t.Fatal(err)
	}
	prob, mass, err := ft.ModelPosterior(s, start, n)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(prob, b.ModelProb) || !slices.Equal(mass, b.ModelMass) {
		t.Errorf("ModelPosterior differs from FitBatch's model posterior")
	}
	for v := range n {
		var sum float64
		for m := range len(ft.Models) {
			sum += float64(prob[v*len(ft.Models)+m])
		}
		// float32 probabilities renormalised to 1.
		if math.Abs(sum-1) > 1e-5 {
			t.Errorf("voxel %d: probabilities sum to %v", v, sum)
		}
	}
	if _, _, err := ft.ModelPosterior(s, len(s.Voxels)-1, 2); err == nil {
		t.Error("a range past the last voxel accepted")
	}
}

// TestFitSettingsRefine checks the refinement's defaults and validation.
func TestFitSettingsRefine(t *testing.T) {
	s := DefaultFitSettings()
	if s.Refine != 3 || s.RefineMALA != 0 {
		t.Errorf("default refinement %d jumps, %d MALA steps; want 3, 0", s.Refine, s.RefineMALA)
	}
	for _, bad := range []FitSettings{{Refine: -1}, {RefineMALA: -2}} {
		b := DefaultFitSettings()
		b.Refine, b.RefineMALA = bad.Refine, bad.RefineMALA
		if err := b.Validate(); err == nil || !strings.Contains(err.Error(), "refinement") {
			t.Errorf("refine %d, MALA %d: error %v", bad.Refine, bad.RefineMALA, err)
		}
	}
}

// TestResolveCorrect: the default correction is SMC (with its particle
// count) for ball-and-sticks fits and none for model-selection fits;
// explicit choices are kept; "auto" validates, unknown names do not.
func TestResolveCorrect(t *testing.T) {
	d := DefaultFitSettings()
	if d.Correct != CorrectAuto {
		t.Fatalf("default correction %q, want %q", d.Correct, CorrectAuto)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	bs := d.ResolveCorrect(true)
	if bs.Correct != "smc" || bs.CorrectParticles != DefaultCorrectSettings(correct.SMC).Particles {
		t.Errorf("ball and sticks: %q with %d particles, want smc with %d", bs.Correct, bs.CorrectParticles, DefaultCorrectSettings(correct.SMC).Particles)
	}
	if sel := d.ResolveCorrect(false); sel.Correct != "none" || sel.CorrectParticles != 0 {
		t.Errorf("model selection: %q with %d particles, want none", sel.Correct, sel.CorrectParticles)
	}
	d.Correct = "smc"
	if sel := d.ResolveCorrect(false); sel.CorrectParticles != SelectParticles {
		t.Errorf("model selection with smc: %d particles, want %d", sel.CorrectParticles, SelectParticles)
	}
	d.Correct = "none"
	if got := d.ResolveCorrect(true); got.Correct != "none" {
		t.Errorf("explicit none became %q", got.Correct)
	}
	d.Correct = "smc"
	d.CorrectParticles = 96
	if got := d.ResolveCorrect(true); got.CorrectParticles != 96 {
		t.Errorf("explicit 96 particles became %d", got.CorrectParticles)
	}
	d.Correct = "automatic"
	if err := d.Validate(); err == nil {
		t.Error("an unknown correction validated")
	}
}

// TestCheckScope: --correct-lambda and --correct-always are refused where
// a fit would ignore them (a ball-and-sticks family, or no correction) and
// accepted for a corrected model-selection fit.
func TestCheckScope(t *testing.T) {
	corrected := DefaultFitSettings()
	corrected.Correct, corrected.CorrectLambda, corrected.CorrectAlways = "smc", 0.9, 1
	off := corrected
	off.Correct = "none"
	for _, c := range []struct {
		name string
		s    FitSettings
		f    family.Family
		ok   bool
	}{
		{"bszt smc", corrected.ResolveCorrect(false), fdmri.BSZT(), true},
		{"bszt none", off.ResolveCorrect(false), fdmri.BSZT(), false},
		{"b3s smc", corrected.ResolveCorrect(true), fdmri.B3S(), false},
		{"b3s defaults", DefaultFitSettings().ResolveCorrect(true), fdmri.B3S(), true},
	} {
		if err := c.s.CheckScope(c.f); (err == nil) != c.ok {
			t.Errorf("%s: CheckScope = %v, want ok %v", c.name, err, c.ok)
		}
	}
}
