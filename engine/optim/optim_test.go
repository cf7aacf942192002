package optim

import (
	"bytes"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prismsbi/prism/engine/safetensors"
)

func newParam(name string, r *rand.Rand, scale float64, shape ...int) Param {
	n, _ := safetensors.NumElements(shape)
	p := Param{Name: name, Shape: shape, Value: make([]float32, n), Grad: make([]float32, n)}
	for i := range p.Value {
		p.Value[i] = float32(scale * r.NormFloat64())
	}
	return p
}

func fillGrads(r *rand.Rand, ps []Param) {
	for _, p := range ps {
		for i := range p.Grad {
			p.Grad[i] = float32(r.NormFloat64())
		}
	}
}

func mustNew(t testing.TB, ps []Param, cfg Config) *Optimizer {
	t.Helper()
	o, err := New(ps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	return o
}

// radamRef is RAdam written from Liu et al. (2020), Algorithm 2, in float64:
//
//	m_t = β1 m + (1−β1) g,  v_t = β2 v + (1−β2) g²,  m̂_t = m_t/(1−β1^t)
//	ρ_t = ρ∞ − 2tβ2^t/(1−β2^t),  ρ∞ = 2/(1−β2) − 1
//	if ρ_t ≥ threshold: l_t = √((1−β2^t)/v_t),
//	                    r_t = √((ρ_t−4)(ρ_t−2)ρ∞ / ((ρ∞−4)(ρ∞−2)ρ_t)),
//	                    θ ← θ − α r_t m̂_t l_t
//	else:               θ ← θ − α m̂_t
//
// The paper switches at ρ_t > 4; optax (and prism) at ρ_t ≥ 5, so the
// threshold is a parameter. The paper's l_t has no ε; prism adds ε = 1e-8 to
// √v̂ as optax does, a relative difference of ε/√v̂ ≈ 1e-8 for the O(1)
// gradients used here.
type radamRef struct {
	lr, b1, b2, threshold float64
	theta, m, v           []float64
	t                     int
}

func (r *radamRef) step(g []float32) {
	r.t++
	t := float64(r.t)
	rhoInf := 2/(1-r.b2) - 1
	b2t := math.Pow(r.b2, t)
	rho := rhoInf - 2*t*b2t/(1-b2t)
	for i := range r.theta {
		gi := float64(g[i])
		r.m[i] = r.b1*r.m[i] + (1-r.b1)*gi
		r.v[i] = r.b2*r.v[i] + (1-r.b2)*gi*gi
		mHat := r.m[i] / (1 - math.Pow(r.b1, t))
		if rho >= r.threshold {
			l := math.Sqrt((1 - b2t) / r.v[i])
			rt := math.Sqrt((rho - 4) * (rho - 2) * rhoInf / ((rhoInf - 4) * (rhoInf - 2) * rho))
			r.theta[i] -= r.lr * rt * mHat * l
		} else {
			r.theta[i] -= r.lr * mHat
		}
	}
}

// TestRAdamMatchesReference runs 30 steps of random gradients, through the
// switch to rectified updates at t = 6, with AGC off, on a tensor large
// enough to be split across two workers, and compares with radamRef.
// Tolerance: prism stores θ, m, v in float32. Rounding θ (|θ| < ~1.5) costs
// at most half an ulp, 1.2e-7, per step, so ≤ 3.6e-6 after 30 steps (in
// practice a random walk, far less); rounding m and v changes each update by
// a relative ~1e-7, i.e. < 1e-9 here. Any formula error (bias correction,
// threshold, r_t, ε placement) moves θ by ≥ lr·r_6 ≈ 2.6e-4. The moments:
// m is updated in float32 (two roundings of terms below 2, ≤ 2.4e-7 per
// step) and old errors decay by β1, so |Δm| ≤ 2.4e-6 (3e-6 allowed); v is a
// sum of positive terms whose rounding stays a relative ~1e-7 per step (1e-6
// allowed).
func TestRAdamMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 11))
	ps := []Param{newParam("w", r, 0.5, 200, 250), newParam("b", r, 0.5, 7)}
	cfg := DefaultConfig()
	cfg.LR = 1e-2
	cfg.Clip = 0
	cfg.Workers = 2
	o := mustNew(t, ps, cfg)
	if len(o.c.segs) != 2 {
		t.Fatalf("expected the work to be split over 2 workers, got %d", len(o.c.segs))
	}
	refs := make([]*radamRef, len(ps))
	for i, p := range ps {
		ref := &radamRef{lr: cfg.LR, b1: 0.9, b2: 0.999, threshold: 5,
			theta: make([]float64, len(p.Value)), m: make([]float64, len(p.Value)), v: make([]float64, len(p.Value))}
		for j, x := range p.Value {
			ref.theta[j] = float64(x)
		}
		refs[i] = ref
	}
	for step := 1; step <= 30; step++ {
		fillGrads(r, ps)
		if err := o.Step(); err != nil {
			t.Fatal(err)
		}
		for i, p := range ps {
			refs[i].step(p.Grad)
			for j, x := range p.Value {
				if d := math.Abs(float64(x) - refs[i].theta[j]); d > 4e-6 {
					t.Fatalf("step %d: %s[%d] = %v, reference %v (|Δ| = %.3g)", step, p.Name, j, x, refs[i].theta[j], d)
				}
			}
		}
	}
	for i, tsr := range o.c.ts {
		for j := range tsr.m {
			if d := math.Abs(float64(tsr.m[j]) - refs[i].m[j]); d > 3e-6 {
				t.Fatalf("m[%d] = %v, reference %v", j, tsr.m[j], refs[i].m[j])
			}
			if d := math.Abs(float64(tsr.v[j]) - refs[i].v[j]); d > 1e-6*refs[i].v[j] {
				t.Fatalf("v[%d] = %v, reference %v", j, tsr.v[j], refs[i].v[j])
			}
		}
	}
}

// TestRho checks ρ_t against closed forms: ρ_1 = 1 and
// ρ_2 = (1+3β2)/(1+β2) for any β2 (expand 1−β2² = (1−β2)(1+β2)); r_t
// against its definition at t = 6; and that ρ_5 < 5 ≤ ρ_6 for β2 = 0.999,
// so optax's threshold first rectifies at step 6 (the paper's ρ_t > 4 at 5).
func TestRho(t *testing.T) {
	for _, b2 := range []float64{0.9, 0.99, 0.999} {
		if got := Rho(b2, 1); math.Abs(got-1) > 1e-9 {
			t.Errorf("ρ_1(β2=%v) = %v, want 1", b2, got)
		}
		if got, want := Rho(b2, 2), (1+3*b2)/(1+b2); math.Abs(got-want) > 1e-9 {
			t.Errorf("ρ_2(β2=%v) = %v, want %v", b2, got, want)
		}
	}
	if r5, r6 := Rho(0.999, 5), Rho(0.999, 6); !(r5 > 4 && r5 < 5 && r6 >= 5) {
		t.Errorf("ρ_5 = %v, ρ_6 = %v; want 4 < ρ_5 < 5 ≤ ρ_6", r5, r6)
	}
	rho, ri := Rho(0.999, 6), 1999.0
	want := math.Sqrt((rho - 4) * (rho - 2) * ri / ((ri - 4) * (ri - 2) * rho))
	if got := Rectifier(0.999, 6); math.Abs(got-want) > 1e-12 {
		t.Errorf("r_6 = %v, want %v", got, want)
	}
	if got := Rectifier(0.999, 1e9); math.Abs(got-1) > 1e-12 {
		t.Errorf("r_∞ = %v, want 1", got)
	}
}

// TestRAdamConstantGradient uses the closed form for a constant gradient g:
// m̂_t = g exactly, v̂_t = g², so each step moves θ by −α·g while ρ_t < 5
// (t ≤ 5) and by −α·r_t·g/(|g|+ε) from t = 6 on. θ starts at 0 so float32
// rounding of θ (< 0.1) costs < 4e-9 per difference; the check allows that
// plus a relative 1e-6 for the float32 moments and arithmetic (a few
// roundings of 6e-8 each).
func TestRAdamConstantGradient(t *testing.T) {
	const g, lr = 3.0, 1e-3
	p := Param{Name: "x", Shape: []int{4}, Value: make([]float32, 4), Grad: []float32{g, g, g, g}}
	cfg := DefaultConfig()
	cfg.LR = lr
	cfg.Clip = 0
	o := mustNew(t, []Param{p}, cfg)
	prev := 0.0
	for step := int64(1); step <= 12; step++ {
		if err := o.Step(); err != nil {
			t.Fatal(err)
		}
		want := -lr * g
		if step >= 6 {
			want = -lr * Rectifier(0.999, step) * g / (g + 1e-8)
		}
		got := float64(p.Value[0]) - prev
		if math.Abs(got-want) > 1e-6*math.Abs(want)+4e-9 {
			t.Errorf("step %d: Δθ = %.9g, want %.9g", step, got, want)
		}
		prev = float64(p.Value[0])
	}
}

// TestAGC checks unit-wise clipping on hand-computed cases. With lr = 1 the
// first RAdam step is θ₁ = θ₀ − m̂₁ = θ₀ − g_clipped (unrectified, and
// m̂₁ = g exactly), so the clipped gradient is read off as θ₀ − θ₁, up to the
// float32 rounding of θ₁ (relative 1e-7 of max(|θ₀|, |g|); 1e-6 allowed).
func TestAGC(t *testing.T) {
	cases := []struct {
		name    string
		shape   []int
		w, g    []float32
		clipped []float32
	}{
		// Columns (output units) of an [in, out] weight: ‖W_:0‖ = 5 → max 10,
		// ‖g_:0‖ = 50 → ×0.2; ‖W_:1‖ = 1 → max 2 > ‖g_:1‖ = 0.5 → unchanged.
		{"matrix", []int{2, 2}, []float32{3, 0, 4, 1}, []float32{30, 0.5, 40, 0}, []float32{6, 0.5, 8, 0}},
		// Vector: one unit, ‖W‖ = 3 → max 6, ‖g‖ = 10 → ×0.6.
		{"vector", []int{3}, []float32{1, 2, 2}, []float32{0, 0, 10}, []float32{0, 0, 6}},
		// [1,3] squeezes to a vector: one unit (per-column norms would give [2,0,0]).
		{"row", []int{1, 3}, []float32{1, 2, 2}, []float32{10, 0, 0}, []float32{6, 0, 0}},
		// Scalar: max 2·0.5 = 1, |g| = 5 → 1.
		{"scalar", []int{}, []float32{0.5}, []float32{5}, []float32{1}},
		// Zero-initialised: max = 2·1e-3; ‖g‖ = 0.05 → ×0.04.
		{"zero init", []int{2}, []float32{0, 0}, []float32{0.03, 0.04}, []float32{0.0012, 0.0016}},
		// Zero-initialised, small gradient below 2e-3: unchanged.
		{"zero init small", []int{2}, []float32{0, 0}, []float32{0.001, 0}, []float32{0.001, 0}},
		// 3-D [2,1,2]: norms over axis 0 → units (0,0) and (0,1), as "matrix".
		{"3d", []int{2, 1, 2}, []float32{3, 1, 4, 0}, []float32{30, 0, 40, 0.1}, []float32{6, 0, 8, 0.1}},
		// 4-D [1,2,1,2]: norms over axes 0,1,2 → units along the last axis.
		{"4d", []int{1, 2, 1, 2}, []float32{3, 1, 4, 0}, []float32{30, 0, 40, 0.1}, []float32{6, 0, 8, 0.1}},
	}
	for _, c := range cases {
		p := Param{Name: c.name, Shape: c.shape, Value: slices.Clone(c.w), Grad: slices.Clone(c.g)}
		cfg := DefaultConfig()
		cfg.LR = 1
		o := mustNew(t, []Param{p}, cfg)
		if err := o.Step(); err != nil {
			t.Fatal(err)
		}
		for i := range c.w {
			got := float64(c.w[i]) - float64(p.Value[i])
			want := float64(c.clipped[i])
			tol := 1e-6 * math.Max(math.Abs(float64(c.w[i])), math.Abs(float64(c.g[i])))
			if math.Abs(got-want) > tol+1e-12 {
				t.Errorf("%s: clipped g[%d] = %v, want %v", c.name, i, got, want)
			}
		}
	}
}

func TestUnitCount(t *testing.T) {
	cases := []struct {
		shape []int
		units int
	}{
		{[]int{}, 1}, {[]int{5}, 1}, {[]int{1, 5}, 1}, {[]int{5, 1}, 1}, {[]int{1, 1, 1, 7}, 1},
		{[]int{4, 5}, 5}, {[]int{2, 3, 4}, 12}, {[]int{2, 1, 3}, 3}, {[]int{2, 3, 4, 5}, 5},
	}
	for _, c := range cases {
		if u, err := unitCount(c.shape); err != nil || u != c.units {
			t.Errorf("unitCount(%v) = %d, %v; want %d", c.shape, u, err, c.units)
		}
	}
	if _, err := unitCount([]int{2, 2, 2, 2, 2}); err == nil {
		t.Error("unitCount accepted a 5-D shape")
	}
}

// TestEMA checks that the shadow starts at the initial values and then
// follows e_t = d·e_{t−1} + (1−d)·θ_t of the new values, recomputed here in
// float64 from the observed θ_t; the float32 shadow may differ by rounding,
// a relative 6e-8 per step (1e-6 allowed over 20 steps).
func TestEMA(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ps := []Param{newParam("w", r, 1, 8, 3)}
	cfg := DefaultConfig()
	cfg.EMADecay = 0.9 // fast decay so the test sees the values move
	cfg.LR = 0.05
	o := mustNew(t, ps, cfg)
	ema := o.EMA()[0]
	if ema.Name != "w" || !slices.Equal(ema.Data, ps[0].Value) {
		t.Fatal("EMA does not start at the parameter values")
	}
	ref := make([]float64, len(ps[0].Value))
	for i, x := range ps[0].Value {
		ref[i] = float64(x)
	}
	for step := 0; step < 20; step++ {
		fillGrads(r, ps)
		if err := o.Step(); err != nil {
			t.Fatal(err)
		}
		for i, x := range ps[0].Value {
			ref[i] = 0.9*ref[i] + 0.1*float64(x)
		}
	}
	for i, e := range o.EMA()[0].Data {
		if math.Abs(float64(e)-ref[i]) > 1e-6*math.Max(1, math.Abs(ref[i])) {
			t.Errorf("ema[%d] = %v, want %v", i, e, ref[i])
		}
	}
	o.ResetEMA()
	if !slices.Equal(o.EMA()[0].Data, ps[0].Value) {
		t.Error("ResetEMA did not copy the values")
	}
}

// TestQuadraticConvergence minimises f(θ) = ½Σ a_i (θ_i − c_i)², curvatures
// a_i ∈ [0.1, 10], with the default configuration (AGC 2.0, EMA 0.999)
// except lr = 1e-2. Adam-type methods with a constant step α settle within
// O(α) of the minimum: θ must end within α of c everywhere. It starts at
// distance |c| < 4, covered at up to ~α per step, so within ~1000 steps; the
// EMA then forgets the approach at rate 0.999 per step, leaving after 8000
// steps a lag ≤ 0.999^7000·4 ≈ 4e-3, so it must be within 2α as well.
func TestQuadraticConvergence(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	ps := []Param{newParam("w", r, 0.1, 6, 5), newParam("b", r, 0.1, 5)}
	a := make([][]float64, len(ps))
	c := make([][]float64, len(ps))
	for k, p := range ps {
		for range p.Value {
			a[k] = append(a[k], 0.1+9.9*r.Float64())
			c[k] = append(c[k], r.NormFloat64())
		}
	}
	cfg := DefaultConfig()
	cfg.LR = 1e-2
	o := mustNew(t, ps, cfg)
	for step := 0; step < 8000; step++ {
		for k, p := range ps {
			for i, x := range p.Value {
				p.Grad[i] = float32(a[k][i] * (float64(x) - c[k][i]))
			}
		}
		if err := o.Step(); err != nil {
			t.Fatal(err)
		}
	}
	ema := o.EMA()
	for k, p := range ps {
		for i, x := range p.Value {
			if d := math.Abs(float64(x) - c[k][i]); d > cfg.LR {
				t.Errorf("%s[%d] = %v, minimum at %v", p.Name, i, x, c[k][i])
			}
			if d := math.Abs(float64(ema[k].Data[i]) - c[k][i]); d > 2*cfg.LR {
				t.Errorf("EMA %s[%d] = %v, minimum at %v", p.Name, i, ema[k].Data[i], c[k][i])
			}
		}
	}
}

func snapshot(o *Optimizer, ps []Param) [][]float32 {
	var out [][]float32
	for _, s := range o.State() {
		out = append(out, slices.Clone(s.Data))
	}
	for _, p := range ps {
		out = append(out, slices.Clone(p.Value))
	}
	return out
}

func equalSnapshots(a, b [][]float32) bool {
	return slices.EqualFunc(a, b, func(x, y []float32) bool {
		return slices.EqualFunc(x, y, func(u, v float32) bool { return math.Float32bits(u) == math.Float32bits(v) })
	})
}

// TestNonFiniteGradient checks that NaN or Inf anywhere (including the part
// of a tensor handled by the second worker) is an error that leaves values,
// moments, EMA and the step count untouched, while huge finite gradients
// (whose squares overflow float32) are accepted.
func TestNonFiniteGradient(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	ps := []Param{newParam("big", r, 1, 300, 200), newParam("small", r, 1, 3)}
	cfg := DefaultConfig()
	cfg.Workers = 2
	o := mustNew(t, ps, cfg)
	fillGrads(r, ps)
	if err := o.Step(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		p, i int
		x    float32
		name string
	}{
		{0, 59000, float32(math.NaN()), "big"},
		{0, 3, float32(math.Inf(1)), "big"},
		{1, 2, float32(math.Inf(-1)), "small"},
	} {
		fillGrads(r, ps)
		ps[bad.p].Grad[bad.i] = bad.x
		before := snapshot(o, ps)
		err := o.Step()
		if err == nil || !strings.Contains(err.Error(), bad.name) {
			t.Errorf("gradient %v in %s: err = %v, want an error naming %q", bad.x, bad.name, err, bad.name)
		}
		if !equalSnapshots(before, snapshot(o, ps)) {
			t.Errorf("gradient %v in %s: state changed by the failed step", bad.x, bad.name)
		}
		if o.StepCount() != 1 {
			t.Errorf("step count %d after failed steps, want 1", o.StepCount())
		}
	}
	fillGrads(r, ps)
	ps[0].Value[7] = float32(math.NaN())
	if err := o.Step(); err == nil {
		t.Error("NaN parameter value accepted")
	}
	ps[0].Value[7] = 0
	fillGrads(r, ps)
	ps[0].Grad[0] = 1e30
	if err := o.Step(); err != nil {
		t.Errorf("huge finite gradient rejected: %v", err)
	}
}

// TestStateRoundTrip interrupts a run after 7 steps, saves the state through
// the safetensors codec, restores it into a fresh optimiser over copies of
// the parameters and checks that the next 5 steps are bit-identical to the
// uninterrupted run.
func TestStateRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 3))
	ps := []Param{newParam("w", r, 1, 40, 30), newParam("b", r, 1, 30), newParam("s", r, 1)}
	o := mustNew(t, ps, DefaultConfig())
	for range 7 {
		fillGrads(r, ps)
		if err := o.Step(); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := safetensors.Encode(&buf, o.State(), nil); err != nil {
		t.Fatal(err)
	}
	saved, _, err := safetensors.Decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	ps2 := make([]Param, len(ps))
	for i, p := range ps {
		ps2[i] = Param{Name: p.Name, Shape: p.Shape, Value: slices.Clone(p.Value), Grad: make([]float32, len(p.Grad))}
	}
	o2 := mustNew(t, ps2, DefaultConfig())
	// Unrelated tensors (the parameters themselves) are ignored.
	saved = append(saved, safetensors.Tensor{Name: "param/w", Shape: []int{1}, Data: []float32{0}})
	if err := o2.Restore(saved); err != nil {
		t.Fatal(err)
	}
	if o2.StepCount() != 7 {
		t.Fatalf("restored step count %d, want 7", o2.StepCount())
	}
	for range 5 {
		fillGrads(r, ps)
		for i := range ps {
			copy(ps2[i].Grad, ps[i].Grad)
		}
		if err := o.Step(); err != nil {
			t.Fatal(err)
		}
		if err := o2.Step(); err != nil {
			t.Fatal(err)
		}
	}
	if !equalSnapshots(snapshot(o, ps), snapshot(o2, ps2)) {
		t.Error("resumed run differs from the uninterrupted one")
	}
}

func TestRestoreRejects(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	ps := []Param{newParam("w", r, 1, 4, 3)}
	o := mustNew(t, ps, DefaultConfig())
	fillGrads(r, ps)
	if err := o.Step(); err != nil {
		t.Fatal(err)
	}
	good := func() []safetensors.Tensor {
		var out []safetensors.Tensor
		for _, s := range o.State() {
			out = append(out, safetensors.Tensor{Name: s.Name, Shape: slices.Clone(s.Shape), Data: slices.Clone(s.Data)})
		}
		return out
	}
	find := func(ts []safetensors.Tensor, name string) *safetensors.Tensor {
		for i := range ts {
			if ts[i].Name == name {
				return &ts[i]
			}
		}
		t.Fatalf("no tensor %q", name)
		return nil
	}
	cases := map[string]func([]safetensors.Tensor) []safetensors.Tensor{
		"missing m": func(ts []safetensors.Tensor) []safetensors.Tensor {
			return slices.DeleteFunc(ts, func(s safetensors.Tensor) bool { return s.Name == "optim/m/w" })
		},
		"missing step": func(ts []safetensors.Tensor) []safetensors.Tensor {
			return slices.DeleteFunc(ts, func(s safetensors.Tensor) bool { return s.Name == StepName })
		},
		"wrong shape": func(ts []safetensors.Tensor) []safetensors.Tensor {
			find(ts, "ema/w").Shape = []int{3, 4}
			return ts
		},
		"unknown parameter": func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.Tensor{Name: "ema/ghost", Shape: []int{1}, Data: []float32{0}})
		},
		"duplicate": func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, *find(ts, "optim/v/w"))
		},
		"NaN moment": func(ts []safetensors.Tensor) []safetensors.Tensor {
			find(ts, "optim/m/w").Data[5] = float32(math.NaN())
			return ts
		},
		"negative v": func(ts []safetensors.Tensor) []safetensors.Tensor {
			find(ts, "optim/v/w").Data[0] = -1
			return ts
		},
		"fractional step": func(ts []safetensors.Tensor) []safetensors.Tensor {
			find(ts, StepName).Data[1] = 2.5
			return ts
		},
	}
	before := snapshot(o, ps)
	for name, corrupt := range cases {
		if err := o.Restore(corrupt(good())); err == nil {
			t.Errorf("%s: Restore succeeded", name)
		}
		if !equalSnapshots(before, snapshot(o, ps)) {
			t.Errorf("%s: failed Restore changed the state", name)
		}
	}
	// Step counts beyond float32's exact integers survive the two-part encoding.
	o.c.step = 1<<24*3 + 12345
	st := good()
	o.c.step = 0
	if err := o.Restore(st); err != nil || o.StepCount() != 1<<24*3+12345 {
		t.Errorf("large step count: restored %d, err %v", o.StepCount(), err)
	}
}

// TestWorkersAgree compares one and two workers over 10 steps. The update
// pass is elementwise and identical; only the float64 summation order of the
// clipping norms differs (relative ~1e-16), which can flip a float32
// rounding at most, hence one ulp of tolerance.
func TestWorkersAgree(t *testing.T) {
	run := func(workers int) []Param {
		r := rand.New(rand.NewPCG(9, 9))
		ps := []Param{newParam("a", r, 0.05, 257, 129), newParam("b", r, 0.05, 129), newParam("c", r, 0.05, 64, 3, 5)}
		cfg := DefaultConfig()
		cfg.Workers = workers
		o := mustNew(t, ps, cfg)
		if len(o.c.segs) != workers {
			t.Fatalf("got %d workers, want %d", len(o.c.segs), workers)
		}
		for range 10 {
			fillGrads(r, ps)
			if err := o.Step(); err != nil {
				t.Fatal(err)
			}
		}
		return ps
	}
	one, two := run(1), run(2)
	for k := range one {
		for i := range one[k].Value {
			a, b := one[k].Value[i], two[k].Value[i]
			if a != b && math.Nextafter32(a, b) != b {
				t.Fatalf("%s[%d]: %v with one worker, %v with two", one[k].Name, i, a, b)
			}
		}
	}
}

func TestStepAllocatesNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ps := []Param{newParam("a", r, 1, 300, 300), newParam("b", r, 1, 300)}
	cfg := DefaultConfig()
	cfg.Workers = 2
	o := mustNew(t, ps, cfg)
	fillGrads(r, ps)
	if n := testing.AllocsPerRun(20, func() {
		if err := o.Step(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Step allocates %v times per call", n)
	}
}

func TestNewRejects(t *testing.T) {
	ok := func() Param {
		return Param{Name: "a", Shape: []int{2}, Value: make([]float32, 2), Grad: make([]float32, 2)}
	}
	bad := map[string][]Param{
		"duplicate":    {ok(), ok()},
		"no name":      {{Shape: []int{1}, Value: make([]float32, 1), Grad: make([]float32, 1)}},
		"short grad":   {{Name: "a", Shape: []int{2}, Value: make([]float32, 2), Grad: make([]float32, 1)}},
		"5-D":          {{Name: "a", Shape: []int{2, 1, 2, 1, 2}, Value: make([]float32, 8), Grad: make([]float32, 8)}},
		"negative dim": {{Name: "a", Shape: []int{-2}}},
	}
	for name, ps := range bad {
		if o, err := New(ps, DefaultConfig()); err == nil {
			o.Close()
			t.Errorf("%s: New succeeded", name)
		}
	}
	for _, mod := range []func(*Config){
		func(c *Config) { c.LR = 0 },
		func(c *Config) { c.Beta1 = 1 },
		func(c *Config) { c.Beta2 = 0 },
		func(c *Config) { c.Eps = 0 },
		func(c *Config) { c.Threshold = 4 },
		func(c *Config) { c.Clip = -1 },
		func(c *Config) { c.EMADecay = 1 },
		func(c *Config) { c.Workers = -1 },
	} {
		cfg := DefaultConfig()
		mod(&cfg)
		if o, err := New([]Param{ok()}, cfg); err == nil {
			o.Close()
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

// benchParams builds ~1M parameters shaped like the reference transformer
// (model_dim 64, MLP width 256): 14 blocks of attention and MLP weights with
// biases and layer norms, plus an embedding.
func benchParams() []Param {
	r := rand.New(rand.NewPCG(1, 1))
	var ps []Param
	add := func(name string, shape ...int) { ps = append(ps, newParam(name, r, 0.05, shape...)) }
	for l := range 14 {
		p := "layer" + string(rune('a'+l)) + "."
		add(p+"wqkv", 64, 192)
		add(p+"bqkv", 192)
		add(p+"wo", 64, 64)
		add(p+"bo", 64)
		add(p+"w1", 64, 256)
		add(p+"b1", 256)
		add(p+"w2", 256, 64)
		add(p+"b2", 64)
		add(p+"ln1", 64)
		add(p+"ln2", 64)
		add(p+"ada", 64, 384)
	}
	add("embed", 1000, 64)
	fillGrads(r, ps)
	return ps
}

// BenchmarkStep measures one AGC+RAdam+EMA step over ~1M parameters with
// one worker and with the default (2 on this machine). The bytes figure
// counts memory traffic: the norm pass reads g and θ (8 B per value), the
// update pass reads g, θ, m, v, EMA and writes θ, m, v, EMA (36 B).
func BenchmarkStep(b *testing.B) {
	for _, workers := range []int{1, 0} {
		name := "workers=default"
		if workers == 1 {
			name = "workers=1"
		}
		b.Run(name, func(b *testing.B) {
			ps := benchParams()
			n := 0
			for _, p := range ps {
				n += len(p.Value)
			}
			cfg := DefaultConfig()
			cfg.Workers = workers
			o := mustNew(b, ps, cfg)
			// Get past the five unrectified warm-up steps.
			for range 6 {
				if err := o.Step(); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(44 * n))
			for b.Loop() {
				if err := o.Step(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n), "params")
		})
	}
}

// TestWorkersStop checks that Close, and otherwise garbage collection of an
// unreachable Optimizer, ends its (here two helper) worker goroutines.
func TestWorkersStop(t *testing.T) {
	settle := func(want int) int {
		var n int
		for range 200 {
			runtime.GC()
			if n = runtime.NumGoroutine(); n <= want {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		return n
	}
	r := rand.New(rand.NewPCG(1, 1))
	ps := []Param{newParam("a", r, 1, 300, 300)}
	cfg := DefaultConfig()
	cfg.Workers = 3
	o, err := New(ps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	running := runtime.NumGoroutine()
	o.Close()
	o.Close() // idempotent
	if n := settle(running - 2); n > running-2 {
		t.Errorf("%d goroutines after Close, want ≤ %d", n, running-2)
	}
	var dropped int
	func() {
		o, err := New(ps, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Step(); err != nil {
			t.Fatal(err)
		}
		dropped = runtime.NumGoroutine()
	}()
	if n := settle(dropped - 2); n > dropped-2 {
		t.Errorf("%d goroutines after dropping an Optimizer, want ≤ %d", n, dropped-2)
	}
}

// TestSetLR checks that a rate changed between steps is the rate of the
// next step: with a constant gradient the first steps are unrectified
// (momentum SGD on m̂ = g), so Δθ = −lr·g exactly as in
// TestRAdamConstantGradient, with the lr of that step (same float32
// tolerance).
func TestSetLR(t *testing.T) {
	const g = 3.0
	p := Param{Name: "x", Shape: []int{2}, Value: make([]float32, 2), Grad: []float32{g, g}}
	cfg := DefaultConfig()
	cfg.Clip = 0
	o := mustNew(t, []Param{p}, cfg)
	prev := 0.0
	for step, lr := range []float64{1e-3, 2e-4, 5e-3} {
		if err := o.SetLR(lr); err != nil {
			t.Fatal(err)
		}
		if err := o.Step(); err != nil {
			t.Fatal(err)
		}
		want := -lr * g
		if got := float64(p.Value[0]) - prev; math.Abs(got-want) > 1e-6*math.Abs(want)+4e-9 {
			t.Errorf("step %d with lr %g: Δθ = %.9g, want %.9g", step+1, lr, got, want)
		}
		prev = float64(p.Value[0])
	}
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if err := o.SetLR(bad); err == nil {
			t.Errorf("SetLR(%v) accepted", bad)
		}
	}
}
