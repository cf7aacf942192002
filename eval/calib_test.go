package eval

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prismsbi/prism/posterior"
)

func TestCalibrationErrorHand(t *testing.T) {
	// All values at 0: F̂(g) = 1 on the whole grid, CE = mean(1 − g) = 1/2
	// exactly (the grid is symmetric about 1/2).
	if ce := CalibrationError([]float64{0, 0, 0}); math.Abs(ce-0.5) > 1e-12 {
		t.Errorf("CE of point mass at 0 = %v, want 0.5", ce)
	}
	// Values at 1: F̂(g) = 0 for g < 1 and 1 at g = 1; CE = (Σ_{g<1} g)/100
	// = (99·98/2/99)/100 = 0.49.
	if ce := CalibrationError([]float64{1, 1}); math.Abs(ce-0.49) > 1e-12 {
		t.Errorf("CE of point mass at 1 = %v, want 0.49", ce)
	}
	if !math.IsNaN(CalibrationError(nil)) {
		t.Error("CE of no values is not NaN")
	}
}

func TestPIT(t *testing.T) {
	// r = 1 + #{s < 0.5} = 3 with S = 4: u = 2.5/5.
	if u := PIT(0.5, []float64{0.1, 0.9, 0.2, 0.7}); u != 0.5 {
		t.Errorf("PIT = %v, want 0.5", u)
	}
	if u := PIT(-1, []float64{0, 1, 2}); u != 0.5/4 {
		t.Errorf("PIT below all = %v, want 0.125", u)
	}
}

func TestRandomizedRankTies(t *testing.T) {
	// When every sample ties with the truth, u = (K + V)/(S+1) with
	// K ~ U{0..S}: exactly U(0,1). The mean of n values has SD
	// √(1/12n) ≈ 0.0029 for n = 10⁴; 5 SD = 0.015. The CE is checked
	// against the simulated 99 % band of n uniforms.
	r := rand.New(rand.NewPCG(1, 2))
	n := 10000
	u := make([]float64, n)
	ties := []float64{-3, -3, -3, -3, -3}
	for i := range u {
		u[i] = RandomizedRank(r, -3, ties)
	}
	if m := mean(u); math.Abs(m-0.5) > 0.015 {
		t.Errorf("mean randomised rank %v, want 0.5 ± 0.015", m)
	}
	band, err := UniformCEBand(n, 0, 300, 0.99, 3)
	if err != nil {
		t.Fatal(err)
	}
	if ce := CalibrationError(u); ce > band.Upper {
		t.Errorf("CE %v of tied ranks above the 99%% uniform band %v", ce, band.Upper)
	}
	// No ties: u ∈ [n</(S+1), (n<+1)/(S+1)).
	for range 100 {
		v := RandomizedRank(r, 0, []float64{-1, 1, 2, -2})
		if v < 2.0/5 || v >= 3.0/5 {
			t.Fatalf("rank without ties %v outside [0.4, 0.6)", v)
		}
	}
}

func TestUniformBandMean(t *testing.T) {
	// For n uniforms, √n(F̂(g) − g) ≈ N(0, g(1−g)), so
	// E|F̂(g) − g| ≈ √(2g(1−g)/(πn)); its grid mean is the expected CE. At
	// n = 2000 the normal approximation is good to a few per cent, and the
	// simulation of 2000 replicates has a relative SE of about 1 %: 6 %
	// tolerance.
	n := 2000
	want := 0.0
	for i := 0; i < GridPoints; i++ {
		g := float64(i) / (GridPoints - 1)
		want += math.Sqrt(2*g*(1-g)/(math.Pi*float64(n))) / GridPoints
	}
	b, err := UniformCEBand(n, 0, 2000, 0.95, 7)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(b.Mean/want-1) > 0.06 {
		t.Errorf("band mean CE %v, normal approximation %v", b.Mean, want)
	}
	if !(b.Upper > b.Mean) {
		t.Errorf("95%% quantile %v not above the mean %v", b.Upper, b.Mean)
	}
	for i, z := range b.Z {
		if b.Lo[i] > z+1e-12 || b.Hi[i] < z-1e-12 {
			t.Fatalf("ECDF band [%v, %v] at %v excludes the diagonal", b.Lo[i], b.Hi[i], z)
		}
	}
	if _, err := UniformCEBand(0, 0, 10, 0.95, 1); err == nil {
		t.Error("no error for n = 0")
	}
}

// gaussianSBC runs parameter SBC on the conjugate model θ ~ N(0,1),
// x | θ ~ N(θ, 1), whose posterior is N(x/2, 1/2), with a sampler whose
// standard deviation is scale × the true one.
func gaussianSBC(trials, S int, scale float64, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, 0))
	u := make([]float64, trials)
	s := make([]float64, S)
	for t := range u {
		theta := r.NormFloat64()
		x := theta + r.NormFloat64()
		for k := range s {
			s[k] = x/2 + scale*math.Sqrt(0.5)*r.NormFloat64()
		}
		u[t] = PIT(theta, s)
	}
	return u
}

// categoricalSBC runs model SBC on a discrete problem: each trial has a
// true posterior p over 8 models (random, some nearly tied), the truth is
// drawn from p, and S samples with their log q are drawn from
// q ∝ p^power (power 1: exact; > 1: over-confident; < 1: under-confident).
func categoricalSBC(trials, S int, power float64, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	u := make([]float64, trials)
	p := make([]float64, 8)
	lq := make([]float64, 8)
	ls := make([]float64, S)
	draw := func(w []float64) int {
		v := r.Float64()
		for k, x := range w {
			v -= x
			if v < 0 {
				return k
			}
		}
		return len(w) - 1
	}
	for t := range u {
		for k := range p {
			p[k] = math.Exp(2 * r.NormFloat64())
		}
		q := make([]float64, 8)
		zp, zq := 0.0, 0.0
		for k := range p {
			zp += p[k]
			q[k] = math.Pow(p[k], power)
			zq += q[k]
		}
		for k := range p {
			p[k] /= zp
			q[k] /= zq
			lq[k] = math.Log(q[k])
		}
		truth := draw(p)
		for k := range ls {
			ls[k] = lq[draw(q)]
		}
		u[t] = RandomizedRank(r, lq[truth], ls)
	}
	return u
}

func TestSBCDetectsMiscalibration(t *testing.T) {
	// A perfectly calibrated sampler has CE inside the 95 % band
	// simulated at the same N (a seeded run; the band's level is the
	// test's false-alarm rate), an over-confident (sd × 0.5) or
	// under-confident (sd × 2) one lies far outside: their CE at N = 1000
	// is about 0.1, the band about 0.03.
	const trials, S = 1000, 100
	band, err := UniformCEBand(trials, S, 1000, 0.95, 11)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		scale  float64
		inside bool
	}{{1, true}, {0.5, false}, {2, false}} {
		ce := CalibrationError(gaussianSBC(trials, S, c.scale, 5))
		if (ce <= band.Upper) != c.inside {
			t.Errorf("parameter SBC, sd × %v: CE %.4f, band %.4f, want inside=%v", c.scale, ce, band.Upper, c.inside)
		}
	}
	mband, err := UniformCEBand(trials, 0, 1000, 0.95, 12)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		power  float64
		inside bool
	}{{1, true}, {3, false}, {0.3, false}} {
		ce := CalibrationError(categoricalSBC(trials, 256, c.power, 6))
		if (ce <= mband.Upper) != c.inside {
			t.Errorf("model SBC, q ∝ p^%v: CE %.4f, band %.4f, want inside=%v", c.power, ce, mband.Upper, c.inside)
		}
	}
}

func TestSelfConsistentBandCorrelated(t *testing.T) {
	// With perfectly correlated coordinates (d copies of one value), the
	// pooled PIT values are d copies of one trial's value, so the CE of a
	// calibrated posterior spreads like that of N/d independent values:
	// the dependent band must be wider than the independent band at N and
	// match the independent band at N/d (within 10 %, the Monte Carlo
	// error of two 95 % quantiles from 1000 replicates is a few per cent).
	const trials, S, d = 300, 50, 4
	r := rand.New(rand.NewPCG(3, 3))
	samples := make([][][]float64, trials)
	for t := range samples {
		samples[t] = make([][]float64, S)
		for s := range samples[t] {
			v := r.NormFloat64()
			samples[t][s] = []float64{v, v, v, v}
		}
	}
	dep, err := SelfConsistentCEBand(samples, 1000, 0.95, 1)
	if err != nil {
		t.Fatal(err)
	}
	ind, _ := UniformCEBand(trials*d, S-1, 1000, 0.95, 2)
	small, _ := UniformCEBand(trials, S-1, 1000, 0.95, 3)
	if !(dep.Upper > 1.5*ind.Upper) {
		t.Errorf("dependent band %v not wider than independent %v", dep.Upper, ind.Upper)
	}
	if math.Abs(dep.Upper/small.Upper-1) > 0.1 {
		t.Errorf("dependent band %v, band of %d independent values %v", dep.Upper, trials, small.Upper)
	}
}

func TestQuantile(t *testing.T) {
	x := []float64{3, 1, math.NaN(), 2, 4}
	if q := Quantile(x, 0.5); q != 2.5 {
		t.Errorf("median %v, want 2.5", q)
	}
	if q := Quantile(x, 1); q != 4 {
		t.Errorf("max %v", q)
	}
	if q := Quantile(x, 0.25); q != 1.75 {
		t.Errorf("type-7 quartile %v, want 1.75", q)
	}
}

func TestAlignTiesRounding(t *testing.T) {
	// Model SBC where the true mask's log q comes from a different
	// computation than the samples' (teacher forcing vs the sampler),
	// modelled as ±5·10⁻⁶ rounding noise. Without aligning ties the
	// frequent re-draws of the true mask are all counted below or all
	// above it and a perfect q looks miscalibrated; alignTies restores
	// CE inside the 95 % band (seeded run).
	const trials, S = 1000, 256
	r := rand.New(rand.NewPCG(21, 0))
	band, _ := UniformCEBand(trials, 0, 1000, 0.95, 22)
	masks := [][]bool{{true, false}, {false, true}, {true, true}}
	raw := make([]float64, trials)
	aligned := make([]float64, trials)
	dst := make([]float64, S)
	for t := range raw {
		p := []float64{0.6, 0.3, 0.1}
		if r.IntN(2) == 0 {
			p = []float64{0.2, 0.45, 0.35}
		}
		draw := func() int {
			v := r.Float64()
			for k, x := range p {
				if v -= x; v < 0 {
					return k
				}
			}
			return len(p) - 1
		}
		truth := draw()
		ms := posterior.MaskSet{Masks: make([][]bool, S), LogQ: make([]float64, S)}
		for s := range S {
			k := draw()
			ms.Masks[s] = masks[k]
			ms.LogQ[s] = math.Log(p[k])
		}
		lt := math.Log(p[truth]) + 5e-6*(2*r.Float64()-1)
		raw[t] = RandomizedRank(r, lt, ms.LogQ)
		aligned[t] = RandomizedRank(r, lt, alignTies(dst, lt, masks[truth], ms))
	}
	if ce := CalibrationError(raw); ce <= band.Upper {
		t.Errorf("CE with rounding-broken ties %v inside the band %v: the test does not exercise ties", ce, band.Upper)
	}
	if ce := CalibrationError(aligned); ce > band.Upper {
		t.Errorf("CE with aligned ties %v outside the band %v", ce, band.Upper)
	}
}

func TestDimCalibrationNamesTheMiscalibratedDimension(t *testing.T) {
	// Per-dimension SBC of four latent dimensions: a calibrated one (300
	// values), an over-confident one (sd × 0.5: CE ≈ 0.1 at 300 values, its
	// band ≈ 0.05), one never active (skipped) and a calibrated one with
	// 100 values (its own, wider band). At the 95 % level a calibrated
	// dimension is outside with probability 0.05 whatever the code (seed 21
	// is such a draw); the seeds used here are not.
	const S = 100
	byDim := [][]float64{
		gaussianSBC(300, S, 1, 24),
		gaussianSBC(300, S, 0.5, 22),
		nil,
		gaussianSBC(100, S, 1, 23),
	}
	names := []string{"Sine.a", "Sine.f", "Exp.b", "Noise.sigma"}
	r := &run{cfg: Config{Seed: 3, BandReps: 1000, BootReps: 200, Level: 0.95}}
	dims, err := r.dimCalibration(names, byDim, S)
	if err != nil {
		t.Fatal(err)
	}
	if len(dims) != 3 {
		t.Fatalf("%d dimensions reported, want 3 (the never-active one skipped)", len(dims))
	}
	want := []struct {
		index  int
		name   string
		values int
		inside bool
	}{{0, "Sine.a", 300, true}, {1, "Sine.f", 300, false}, {3, "Noise.sigma", 100, true}}
	for i, w := range want {
		d := dims[i]
		if d.Index != w.index || d.Name != w.name || d.Values != w.values || d.Inside != w.inside {
			t.Errorf("dimension %d: %+v, want index %d %s, %d values, inside %v", i, d, w.index, w.name, w.values, w.inside)
		}
		if !(d.CE.SE > 0) {
			t.Errorf("%s: bootstrap SE %v", d.Name, d.CE.SE)
		}
	}
	if !(dims[2].BandUpper > dims[0].BandUpper) {
		t.Errorf("band at 100 values %.4f not wider than at 300 %.4f", dims[2].BandUpper, dims[0].BandUpper)
	}
	s := DimSummary(dims, 0.95, 1)
	if !strings.HasPrefix(s, "1 of 3 dimensions outside their bands (0.2 expected by chance); worst: Sine.f ") {
		t.Errorf("DimSummary: %q", s)
	}
}

// TestBandAtLevelBoundaries: the pointwise ECDF band of discrete PIT values
// is taken at the boundaries k/L between their L levels (S + 1 for
// UniformCEBand with S ranks, S for the self-consistent band with S
// samples per trial), where a calibrated ECDF's expectation is k/L, so
// every interval [Lo, Hi] contains its own z; on the 201-point grid of
// continuous values the same holds by construction.
func TestBandAtLevelBoundaries(t *testing.T) {
	const S = 20
	check := func(name string, b Band, levels int) {
		t.Helper()
		if len(b.Z) != levels+1 || len(b.Lo) != levels+1 || len(b.Hi) != levels+1 {
			t.Fatalf("%s: %d/%d/%d points, want %d", name, len(b.Z), len(b.Lo), len(b.Hi), levels+1)
		}
		for k, z := range b.Z {
			if math.Abs(z-float64(k)/float64(levels)) > 1e-15 {
				t.Errorf("%s: Z[%d] = %v, want %d/%d", name, k, z, k, levels)
			}
			// The 95 % interval of a binomial proportion with mean z
			// (n = 2000 values) contains z.
			if !(b.Lo[k] <= z+1e-12 && z <= b.Hi[k]+1e-12) {
				t.Errorf("%s: at z = %v the band is [%v, %v]", name, z, b.Lo[k], b.Hi[k])
			}
		}
	}
	b, err := UniformCEBand(2000, S, 400, 0.95, 5)
	if err != nil {
		t.Fatal(err)
	}
	check("ranks", b, S+1)
	b, err = UniformCEBand(2000, 0, 400, 0.95, 5)
	if err != nil {
		t.Fatal(err)
	}
	check("continuous", b, 200)
	r := rand.New(rand.NewPCG(4, 4))
	samples := make([][][]float64, 1000)
	for i := range samples {
		samples[i] = make([][]float64, S)
		for s := range samples[i] {
			samples[i][s] = []float64{r.NormFloat64(), r.NormFloat64()}
		}
	}
	b, err = SelfConsistentCEBand(samples, 400, 0.95, 6)
	if err != nil {
		t.Fatal(err)
	}
	check("self-consistent", b, S)
}
