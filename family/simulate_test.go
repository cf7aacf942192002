package family

import (
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// toyFamily is a minimal family for testing the generic machinery: two base
// components with one latent each whose fractions live on a simplex, and two
// noise components with one latent (log σ) each. Its designs have a random
// number of points, so the design draw is visible in the random stream.
type toyFamily struct{}

func (toyFamily) Name() string        { return "toy" }
func (toyFamily) Description() string { return "test family" }
func (toyFamily) Components() []Component {
	return []Component{
		{Name: "A", Kind: Base, Params: []Param{{Name: "a"}}, Latent: 1},
		{Name: "B", Kind: Base, Params: []Param{{Name: "b"}}, Latent: 1},
		{Name: "N1", Kind: Noise, Params: []Param{{Name: "s"}}, Latent: 1},
		{Name: "N2", Kind: Noise, Params: []Param{{Name: "s"}}, Latent: 1},
	}
}
func (f toyFamily) Layout() *Layout {
	return NewLayout(f.Components(), []int{0, 1}, []float64{1, 2}, nil)
}
func (toyFamily) MaskPrior() MaskPrior { return BernoulliPrior{NumBase: 2, NumNoise: 2} }

type toyDesigns struct{}

func (toyDesigns) SampleDesign(r *rand.Rand) Design {
	n := 3 + r.IntN(3)
	cov := make([]float64, n)
	for i := range cov {
		cov[i] = float64(i)
	}
	return Design{N: n, CovDim: 1, Cov: cov, Name: "toy"}
}

func (toyFamily) Designs(string) (DesignSampler, error) { return toyDesigns{}, nil }

func (toyFamily) Forward(d Design, theta []float64, mask []bool, out []float64) {
	var pi [2]float64
	StickBreaking{Alpha: []float64{1, 2}}.Fractions(theta[:1], mask[:2], pi[:])
	for j := range out {
		x := d.Row(j)[0]
		out[j] = 0
		if mask[0] {
			out[j] += pi[0] * theta[1] * x
		}
		if mask[1] {
			out[j] += pi[1] * theta[2]
		}
	}
}

func (f toyFamily) sigma(theta []float64, mask []bool) float64 {
	if mask[2] {
		return math.Exp(theta[3])
	}
	return 2 * math.Exp(theta[4])
}

func (f toyFamily) Simulate(r *rand.Rand, d Design, theta []float64, mask []bool, out []float64) {
	f.Forward(d, theta, mask, out)
	s := f.sigma(theta, mask)
	for j := range out {
		out[j] += s * r.NormFloat64()
	}
}

func (f toyFamily) LogLikelihood(d Design, x, theta []float64, mask []bool, grad []float64) float64 {
	panic("not used")
}
func (toyFamily) Natural(theta []float64, mask []bool) Params { panic("not used") }
func (toyFamily) Latent(p Params, mask []bool) ([]float64, error) {
	panic("not used")
}

func TestSimulateBatchSplitInvariant(t *testing.T) {
	f := toyFamily{}
	for _, lambda := range []float64{math.NaN(), 0.4} {
		opt := SimOptions{Seed: 42, Lambda: lambda}
		whole := make([]Sample, 100)
		SimulateBatch(f, opt, 7, whole)
		parts := make([]Sample, 100)
		for b := 0; b < 10; b++ {
			SimulateBatch(f, opt, 7+uint64(10*b), parts[10*b:10*b+10])
		}
		if !reflect.DeepEqual(whole, parts) {
			t.Errorf("λ=%g: one batch of 100 differs from 10 batches of 10", lambda)
		}
		// One thread must give the same stream as all threads.
		prev := runtime.GOMAXPROCS(1)
		serial := make([]Sample, 100)
		SimulateBatch(f, opt, 7, serial)
		runtime.GOMAXPROCS(prev)
		if !reflect.DeepEqual(whole, serial) {
			t.Errorf("λ=%g: GOMAXPROCS=1 result differs", lambda)
		}
		// Different seeds give different streams.
		other := make([]Sample, 100)
		SimulateBatch(f, SimOptions{Seed: 43, Lambda: lambda}, 7, other)
		if reflect.DeepEqual(whole, other) {
			t.Errorf("seeds 42 and 43 gave identical samples")
		}
	}
}

// TestSimulateBatchDrawOrder replays sample i by hand from SampleRNG in the
// documented order (λ, mask, θ, design, noise) and checks it matches.
func TestSimulateBatchDrawOrder(t *testing.T) {
	f := toyFamily{}
	out := make([]Sample, 20)
	SimulateBatch(f, SimOptions{Seed: 9, Lambda: math.NaN()}, 100, out)
	for i, s := range out {
		r := SampleRNG(9, 100+uint64(i))
		lambda := r.Float64()
		mask := make([]bool, 4)
		f.MaskPrior().Sample(r, lambda, mask)
		theta := make([]float64, 5)
		for j := range theta {
			theta[j] = r.NormFloat64()
		}
		d := toyDesigns{}.SampleDesign(r)
		x := make([]float64, d.N)
		f.Simulate(r, d, theta, mask, x)
		want := Sample{Index: 100 + uint64(i), Lambda: lambda, Mask: mask, Theta: theta, Design: d, X: x}
		if !reflect.DeepEqual(s, want) {
			t.Fatalf("sample %d:\n got %+v\nwant %+v", i, s, want)
		}
	}
}

// TestSimulateBatchReusesBuffers checks that a second pass over the same
// samples allocates a fixed amount per batch (goroutine start-up), not per
// sample.
func TestSimulateBatchReusesBuffers(t *testing.T) {
	f := toyFamily{}
	d := Design{N: 4, CovDim: 1, Cov: []float64{0, 1, 2, 3}}
	opt := SimOptions{Seed: 1, Lambda: math.NaN(), Designs: FixedDesign(d)}
	small := make([]Sample, 8)
	large := make([]Sample, 800)
	SimulateBatch(f, opt, 0, small)
	SimulateBatch(f, opt, 0, large)
	aSmall := testing.AllocsPerRun(20, func() { SimulateBatch(f, opt, 0, small) })
	aLarge := testing.AllocsPerRun(20, func() { SimulateBatch(f, opt, 0, large) })
	if aLarge > aSmall {
		t.Errorf("allocations grow with batch size: %v for 8 samples, %v for 800", aSmall, aLarge)
	}
}

func TestSimulateLambdaUniform(t *testing.T) {
	out := make([]Sample, 5000)
	SimulateBatch(toyFamily{}, SimOptions{Seed: 3, Lambda: math.NaN()}, 0, out)
	ls := make([]float64, len(out))
	for i, s := range out {
		ls[i] = s.Lambda
	}
	if d := ksStat(ls, func(x float64) float64 { return x }); d > ksCrit(len(ls)) {
		t.Errorf("λ not uniform: KS D = %g", d)
	}
}

func TestMaskStringParse(t *testing.T) {
	m := []bool{false, true, true, false, true}
	s := MaskString(m)
	if s != "01101" {
		t.Fatalf("MaskString = %q", s)
	}
	back, err := ParseMask(s, 5)
	if err != nil || !reflect.DeepEqual(back, m) {
		t.Fatalf("ParseMask(%q) = %v, %v", s, back, err)
	}
	if _, err := ParseMask("0110", 5); err == nil {
		t.Error("ParseMask accepted a mask of the wrong length")
	}
	if _, err := ParseMask("01x01", 5); err == nil {
		t.Error("ParseMask accepted a non-binary character")
	}
	if n := ActiveCount(m); n != 3 {
		t.Errorf("ActiveCount = %d", n)
	}
}

func TestLogPriorLatent(t *testing.T) {
	theta := []float64{0.3, -1.2, 2.5, 0.1}
	active := []bool{true, false, true, true}
	want := 0.0
	for i, a := range active {
		if a {
			want += distuv.UnitNormal.LogProb(theta[i])
		}
	}
	if got := LogPriorLatent(theta, active); math.Abs(got-want) > 1e-14 {
		t.Errorf("LogPriorLatent = %g, want %g", got, want)
	}
	grad := make([]float64, 4)
	GradLogPriorLatent(theta, active, grad)
	for i := range theta {
		h := 1e-5
		t0 := theta[i]
		theta[i] = t0 + h
		fp := LogPriorLatent(theta, active)
		theta[i] = t0 - h
		fm := LogPriorLatent(theta, active)
		theta[i] = t0
		// The density is quadratic: central differences are exact up to
		// rounding (1e-16·|f|/h ≈ 1e-11).
		if fd := (fp - fm) / (2 * h); math.Abs(fd-grad[i]) > 1e-9 {
			t.Errorf("grad[%d] = %g, FD %g", i, grad[i], fd)
		}
	}
}

func TestLayoutActive(t *testing.T) {
	comps := []Component{
		{Name: "A", Latent: 1}, {Name: "B", Latent: 2}, {Name: "C", Latent: 0},
		{Name: "D", Latent: 2}, {Name: "N", Kind: Noise, Latent: 1},
	}
	l := NewLayout(comps, []int{0, 1, 2, 3}, []float64{1, 1, 1, 1}, []Param{{Name: "s"}})
	// θ: 3 fraction latents, 1 shared, then blocks 1+2+0+2+1 ⇒ DMax 10.
	if l.DMax != 10 || l.Blocks[1].Offset != 5 || l.Blocks[4].Offset != 9 {
		t.Fatalf("layout %+v", l)
	}
	active := make([]bool, l.DMax)
	allMasks(5, func(_ int, mask []bool) {
		l.Active(mask, active)
		for i := 0; i < 3; i++ {
			if active[i] != latentActive(mask[:4], i) {
				t.Errorf("mask %s: fraction latent %d active=%v", MaskString(mask), i, active[i])
			}
		}
		if !active[3] {
			t.Errorf("mask %s: shared latent inactive", MaskString(mask))
		}
		for k, b := range l.Blocks {
			for j := b.Offset; j < b.Offset+b.Size; j++ {
				if active[j] != mask[k] {
					t.Errorf("mask %s: latent %d of component %d active=%v", MaskString(mask), j, k, active[j])
				}
			}
		}
	})
}

func BenchmarkSimulateBatchToy(b *testing.B) {
	out := make([]Sample, 1024)
	opt := SimOptions{Seed: 1, Lambda: math.NaN()}
	for b.Loop() {
		SimulateBatch(toyFamily{}, opt, 0, out)
	}
}

func TestModelSpaceSize(t *testing.T) {
	if got := ModelSpaceSize(toyFamily{}); got.Int64() != 8 {
		t.Errorf("toy: %v, want 2²·2 = 8", got)
	}
	if got := ModelSpaceSize(minActiveToy{}); got.Int64() != 3*2 {
		t.Errorf("toy with ≥1 active: %v, want (2²−1)·2 = 6", got)
	}
}

type minActiveToy struct{ toyFamily }

func (minActiveToy) MaskPrior() MaskPrior {
	return BernoulliPrior{NumBase: 2, NumNoise: 2, MinActive: 1}
}

// TestMaskCode: the bit code puts component k at bit k (checked against
// the binary reading of the reversed mask string) and is 0 for the empty
// mask.
func TestMaskCode(t *testing.T) {
	for _, c := range []struct {
		mask string
		want uint32
	}{{"000", 0}, {"100", 1}, {"011", 6}, {"1011", 13}, {"0000000000000000000001", 1 << 21}} {
		m, err := ParseMask(c.mask, len(c.mask))
		if err != nil {
			t.Fatal(err)
		}
		if got := MaskCode(m); got != c.want {
			t.Errorf("MaskCode(%s) = %d, want %d", c.mask, got, c.want)
		}
		back := make([]bool, len(c.mask))
		for k := range back {
			back[k] = k%2 == 0 // stale contents, overwritten
		}
		if MaskFromCode(c.want, back); MaskString(back) != c.mask {
			t.Errorf("MaskFromCode(%d) = %s, want %s", c.want, MaskString(back), c.mask)
		}
	}
}
