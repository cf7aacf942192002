// Package optim implements the parameter update of prism's training loop:
// adaptive gradient clipping (AGC, Brock et al. 2021), the RAdam optimiser
// (Liu et al. 2020) and an exponential moving average (EMA) of the
// parameters, fused into one pass over plain float32 slices, as the PRISM
// reference code does with optax:
//
//	chain(adaptive_grad_clip(2.0), radam(5e-4)), then ema(0.999) of the new parameters.
//
// One Step reads every gradient once to compute the clipping norms (and to
// refuse non-finite gradients before anything is modified), then updates
// moments, parameters and EMA in a second pass. Both passes run in parallel
// over chunks of the flattened parameters and allocate nothing.
//
// Deviations from optax, all deliberate:
//   - The EMA shadow starts at the parameters' initial values, not at zero.
//     optax.ema(0.999, debias=False) as used by the reference starts at zero,
//     which makes EMA weights meaningless for the first several thousand
//     steps; starting at the parameters needs no debiasing and agrees with
//     the zero start up to a term 0.999^t·θ₀ that vanishes in long runs.
//   - Per-step scalars (bias corrections, ρ_t, r_t) are computed in float64;
//     optax computes them in float32, where ρ_t carries an absolute error of
//     up to ~0.04 during the first steps. Which step first rectifies (t = 6
//     for β2 = 0.999) is the same in both. The clipping norms are
//     accumulated in float64; the elementwise update runs in float32 like
//     optax's (float64 during the five unrectified warm-up steps).
//   - A non-finite gradient is an error (see Step) instead of being applied.
package optim

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/prismsbi/prism/engine/kernels"
	"github.com/prismsbi/prism/engine/safetensors"
)

// Param is one parameter tensor: its values, updated in place by Step, and
// the gradient buffer Step reads. Both slices have the length of Shape's
// product and stay owned by the caller; the optimiser keeps references.
type Param struct {
	Name        string
	Shape       []int
	Value, Grad []float32
}

// Config holds the hyperparameters. Start from DefaultConfig.
type Config struct {
	LR        float64 // learning rate (SetLR changes it between steps)
	Beta1     float64 // first-moment decay
	Beta2     float64 // second-moment decay
	Eps       float64 // added to √v̂ in the denominator
	Threshold float64 // rectify once ρ_t ≥ Threshold (optax: 5; the paper uses ρ_t > 4)
	Clip      float64 // AGC factor λ: ‖g_unit‖ ≤ λ·max(‖W_unit‖, ClipEps); 0 disables AGC
	ClipEps   float64 // floor on parameter norms in AGC (optax: 1e-3)
	EMADecay  float64 // EMA decay in [0, 1)
	// Workers bounds the goroutines used by Step; 0 means
	// min(GOMAXPROCS, 4). Small models (< 32768 values) always use one.
	Workers int
}

// DefaultConfig returns the PRISM settings (paper §4 and reference code):
// RAdam with lr 5e-4, β = (0.9, 0.999), ε = 1e-8, threshold 5; AGC with
// clipping 2.0 and ε = 1e-3; EMA decay 0.999.
func DefaultConfig() Config {
	return Config{
		LR: 5e-4, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Threshold: 5,
		Clip: 2, ClipEps: 1e-3, EMADecay: 0.999,
	}
}

func (c Config) validate() error {
	switch {
	case !(c.LR > 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("learning rate %v must be positive and finite", c.LR)
	case !(c.Beta1 >= 0 && c.Beta1 < 1):
		return fmt.Errorf("Beta1 %v outside [0, 1)", c.Beta1)
	case !(c.Beta2 > 0 && c.Beta2 < 1):
		return fmt.Errorf("Beta2 %v outside (0, 1)", c.Beta2)
	case !(c.Eps > 0):
		return fmt.Errorf("Eps %v must be positive", c.Eps)
	case !(c.Threshold > 4):
		// r_t needs ρ_t > 4 to be real.
		return fmt.Errorf("Threshold %v must exceed 4", c.Threshold)
	case !(c.Clip >= 0) || math.IsInf(c.Clip, 0):
		return fmt.Errorf("Clip %v must be non-negative and finite", c.Clip)
	case c.Clip > 0 && !(c.ClipEps > 0):
		return fmt.Errorf("ClipEps %v must be positive", c.ClipEps)
	case !(c.EMADecay >= 0 && c.EMADecay < 1):
		return fmt.Errorf("EMADecay %v outside [0, 1)", c.EMADecay)
	case c.Workers < 0:
		return fmt.Errorf("Workers %d is negative", c.Workers)
	}
	return nil
}

// Metadata describes the configuration as checkpoint metadata under the
// keys documented in docs/checkpoint-format.md.
func (c Config) Metadata() map[string]string {
	f := func(x float64) string { return fmt.Sprint(x) }
	return map[string]string{
		"prism.optim":           "radam+agc+ema",
		"prism.optim.lr":        f(c.LR),
		"prism.optim.beta1":     f(c.Beta1),
		"prism.optim.beta2":     f(c.Beta2),
		"prism.optim.eps":       f(c.Eps),
		"prism.optim.threshold": f(c.Threshold),
		"prism.optim.clip":      f(c.Clip),
		"prism.optim.clip_eps":  f(c.ClipEps),
		"prism.optim.ema_decay": f(c.EMADecay),
	}
}

// divEps guards the division by the gradient norm in AGC (optax's div_eps).
const divEps = 1e-6

// minParallel is the number of values below which Step runs on one
// goroutine: the hand-off costs a few microseconds, a pass over 32768 values
// about as much.
const minParallel = 1 << 15

// Optimizer applies AGC, RAdam and the EMA to a fixed set of parameters.
// It is not safe for concurrent use. Call Close when done to stop its worker
// goroutines (they are also stopped when the Optimizer is garbage collected).
type Optimizer struct {
	c *core
}

// tensorState is one parameter with its optimiser state.
type tensorState struct {
	p       Param
	units   int // number of AGC units; flat element i belongs to unit i % units
	unitOff int // offset of this tensor's units in the per-unit arrays
	m, v    []float32
	ema     []float32
}

// segment is the element range [lo, hi) of tensor t handled by one worker.
type segment struct{ t, lo, hi int }

// scalars are the per-step constants of the update pass.
type scalars struct {
	b1, omb1, b2, omb2 float64
	lrC1               float64 // lr / (1 − β1^t): unrectified step
	rLRC1              float64 // lr · r_t / (1 − β1^t): rectified step
	c2                 float64 // 1 / (1 − β2^t)
	eps                float64
	rect               bool
	dec, omDec         float64
}

const (
	phaseNorms = iota
	phaseUpdate
)

// core holds everything the workers touch, so that the Optimizer wrapper can
// become unreachable (and be cleaned up) while workers are alive.
type core struct {
	cfg      Config
	ts       []tensorState
	segs     [][]segment // per worker
	gsq, wsq [][]float64 // per worker, per unit: partial sums of squares
	scale    []float64   // per unit: AGC factor applied to the gradient
	step     int64
	k        scalars

	start     []chan int // per helper worker (index 0 unused)
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// New prepares an optimiser for params: it validates shapes, allocates the
// moments (zero) and the EMA shadow (a copy of the current values), and
// starts its worker goroutines. Names must be unique and non-empty. AGC units
// follow optax.adaptive_grad_clip: tensors that are scalars or vectors after
// dropping unit dimensions are one unit; 2-D and 3-D tensors have one unit
// per index of the trailing axes (norms over axis 0, i.e. per output column
// of an [in, out] weight); 4-D tensors one per index of the last axis; more
// dimensions are an error.
func New(params []Param, cfg Config) (*Optimizer, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("optim: %w", err)
	}
	c := &core{cfg: cfg}
	seen := make(map[string]bool)
	total, totalUnits := 0, 0
	for _, p := range params {
		if p.Name == "" {
			return nil, errors.New("optim: parameter without a name")
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("optim: duplicate parameter name %q", p.Name)
		}
		seen[p.Name] = true
		n, err := safetensors.NumElements(p.Shape)
		if err != nil {
			return nil, fmt.Errorf("optim: parameter %q: %w", p.Name, err)
		}
		if len(p.Value) != n || len(p.Grad) != n {
			return nil, fmt.Errorf("optim: parameter %q: shape %v has %d elements, Value has %d, Grad has %d",
				p.Name, p.Shape, n, len(p.Value), len(p.Grad))
		}
		u, err := unitCount(p.Shape)
		if err != nil {
			return nil, fmt.Errorf("optim: parameter %q: %w", p.Name, err)
		}
		c.ts = append(c.ts, tensorState{p: p, units: u, unitOff: totalUnits})
		total += n
		totalUnits += u
	}
	slab := make([]float32, 3*total)
	off := 0
	for i := range c.ts {
		t := &c.ts[i]
		n := len(t.p.Value)
		t.m = slab[off : off+n : off+n]
		t.v = slab[total+off : total+off+n : total+off+n]
		t.ema = slab[2*total+off : 2*total+off+n : 2*total+off+n]
		copy(t.ema, t.p.Value)
		off += n
	}

	nw := cfg.Workers
	if nw == 0 {
		nw = min(runtime.GOMAXPROCS(0), 4)
	}
	if total < minParallel || nw < 1 {
		nw = 1
	}
	c.segs = splitWork(c.ts, total, nw)
	c.gsq = make([][]float64, nw)
	c.wsq = make([][]float64, nw)
	for w := range nw {
		c.gsq[w] = make([]float64, totalUnits)
		c.wsq[w] = make([]float64, totalUnits)
	}
	c.scale = make([]float64, totalUnits)
	c.start = make([]chan int, nw)
	for w := 1; w < nw; w++ {
		c.start[w] = make(chan int)
		go c.worker(w)
	}
	o := &Optimizer{c: c}
	runtime.AddCleanup(o, func(c *core) { c.close() }, c)
	return o, nil
}

// unitCount returns the number of AGC units of a tensor of the given shape,
// following optax.adaptive_grad_clip's unitwise_norm. Units are always the
// trailing axes, so flat element i belongs to unit i % units.
func unitCount(shape []int) (int, error) {
	squeezed := 0
	for _, d := range shape {
		if d != 1 {
			squeezed++
		}
	}
	n, _ := safetensors.NumElements(shape)
	switch {
	case squeezed <= 1:
		return 1, nil // scalars and vectors: one norm over everything
	case len(shape) == 2 || len(shape) == 3:
		return n / shape[0], nil // norms over axis 0
	case len(shape) == 4:
		return shape[3], nil // norms over axes 0, 1, 2 (HWIO kernels)
	default:
		return 0, fmt.Errorf("AGC supports tensors of up to 4 dimensions, got shape %v", shape)
	}
}

// splitWork cuts the flattened parameters into nw contiguous ranges of
// (nearly) equal size, expressed as per-tensor segments.
func splitWork(ts []tensorState, total, nw int) [][]segment {
	segs := make([][]segment, nw)
	base := 0 // flat index of the current tensor's first element
	for i := range ts {
		n := len(ts[i].p.Value)
		for w := range nw {
			lo, hi := w*total/nw, (w+1)*total/nw
			lo, hi = max(lo, base), min(hi, base+n)
			if lo < hi {
				segs[w] = append(segs[w], segment{t: i, lo: lo - base, hi: hi - base})
			}
		}
		base += n
	}
	return segs
}

func (c *core) worker(w int) {
	for phase := range c.start[w] {
		c.work(phase, w)
		c.wg.Done()
	}
}

// run executes phase on all workers, the calling goroutine acting as worker 0.
func (c *core) run(phase int) {
	nw := len(c.segs)
	c.wg.Add(nw - 1)
	for w := 1; w < nw; w++ {
		c.start[w] <- phase
	}
	c.work(phase, 0)
	c.wg.Wait()
}

func (c *core) close() {
	c.closeOnce.Do(func() {
		for _, ch := range c.start[1:] {
			close(ch)
		}
	})
}

// Close stops the worker goroutines. The Optimizer must not be used after.
func (o *Optimizer) Close() { o.c.close() }

func (c *core) work(phase, w int) {
	switch phase {
	case phaseNorms:
		gsq, wsq := c.gsq[w], c.wsq[w]
		clear(gsq)
		clear(wsq)
		for _, s := range c.segs[w] {
			t := &c.ts[s.t]
			gs := gsq[t.unitOff : t.unitOff+t.units]
			if c.cfg.Clip > 0 {
				ws := wsq[t.unitOff : t.unitOff+t.units]
				kernels.SumSquares2(t.p.Grad[s.lo:s.hi], t.p.Value[s.lo:s.hi], gs, ws, s.lo%t.units)
			} else {
				sumSquares(t.p.Grad[s.lo:s.hi], gs, s.lo%t.units)
			}
		}
	case phaseUpdate:
		for _, s := range c.segs[w] {
			t := &c.ts[s.t]
			sc := c.scale[t.unitOff : t.unitOff+t.units]
			update(&c.k, sc, s.lo%t.units, t.p.Grad[s.lo:s.hi], t.p.Value[s.lo:s.hi],
				t.m[s.lo:s.hi], t.v[s.lo:s.hi], t.ema[s.lo:s.hi])
		}
	}
}

// sumSquares adds g[i]² to acc[(u0+i) % len(acc)].
func sumSquares(g []float32, acc []float64, u0 int) {
	u := u0
	for _, x := range g {
		acc[u] += float64(x) * float64(x)
		if u++; u == len(acc) {
			u = 0
		}
	}
}

// update is the fused elementwise step: clip, moments, RAdam, EMA.
func update(k *scalars, scale []float64, u0 int, grad, val, m, v, ema []float32) {
	n := len(grad)
	val, m, v, ema = val[:n], m[:n], v[:n], ema[:n]
	u := u0
	if k.rect {
		// float32 arithmetic in a C kernel (kernels.RAdamRect): sqrt and
		// division dominate the step and are about twice as fast in single
		// precision (optax also computes in float32); the profile of a
		// lingauss-k6 run put 12 % of the training time in the Go loop
		// this replaces. Subnormal moments are flushed to zero there.
		kernels.RAdamRect(scale, u0, grad, val, m, v, ema, &kernels.RAdamScalars{
			B1: float32(k.b1), OmB1: float32(k.omb1), B2: float32(k.b2), OmB2: float32(k.omb2),
			A: float32(k.rLRC1), C2: float32(k.c2), Eps: float32(k.eps), Dec: float32(k.dec), OmDec: float32(k.omDec)})
		return
	}
	for i, gi := range grad {
		g := float64(gi) * scale[u]
		if u++; u == len(scale) {
			u = 0
		}
		mi := k.b1*float64(m[i]) + k.omb1*g
		vi := k.b2*float64(v[i]) + k.omb2*g*g
		m[i], v[i] = float32(mi), float32(vi)
		w := float32(float64(val[i]) - k.lrC1*mi)
		val[i] = w
		ema[i] = float32(k.dec*float64(ema[i]) + k.omDec*float64(w))
	}
}

// Step applies one update from the current gradients: unit-wise AGC, then
// RAdam, then the EMA of the new values. If any gradient (or, with AGC, any
// parameter value) is NaN or ±Inf, Step returns an error and changes
// nothing: values, moments, EMA and step count stay as they were.
func (o *Optimizer) Step() error {
	c := o.c
	c.run(phaseNorms)
	clip := c.cfg.Clip
	for ti := range c.ts {
		t := &c.ts[ti]
		for u := range t.units {
			j := t.unitOff + u
			var gs, ws float64
			for w := range c.gsq {
				gs += c.gsq[w][j]
				ws += c.wsq[w][j]
			}
			// A sum of float32 squares in float64 cannot overflow, so it is
			// finite exactly when every term is.
			if math.IsNaN(gs) || math.IsInf(gs, 0) {
				return fmt.Errorf("optim: step %d: gradient of %q contains NaN or Inf; nothing updated", c.step+1, t.p.Name)
			}
			if math.IsNaN(ws) || math.IsInf(ws, 0) {
				return fmt.Errorf("optim: step %d: value of %q contains NaN or Inf; nothing updated", c.step+1, t.p.Name)
			}
			s := 1.0
			if clip > 0 {
				maxNorm := clip * math.Max(math.Sqrt(ws), c.cfg.ClipEps)
				if gn := math.Sqrt(gs); !(gn < maxNorm) {
					s = maxNorm / math.Max(gn, divEps)
				}
			}
			c.scale[j] = s
		}
	}
	c.k = c.cfg.scalars(c.step + 1)
	c.run(phaseUpdate)
	c.step++
	return nil
}

// rhoInf is ρ_∞ = 2/(1−β2) − 1.
func rhoInf(b2 float64) float64 { return 2/(1-b2) - 1 }

// Rho returns ρ_t = ρ_∞ − 2tβ2^t/(1−β2^t), the length of the approximated
// simple moving average in RAdam after t steps.
func Rho(b2 float64, t int64) float64 {
	b2t := math.Pow(b2, float64(t))
	return rhoInf(b2) - 2*float64(t)*b2t/(1-b2t)
}

// Rectifier returns RAdam's variance rectification term
// r_t = √((ρ_t−4)(ρ_t−2)ρ_∞ / ((ρ_∞−4)(ρ_∞−2)ρ_t)), defined for ρ_t > 4.
func Rectifier(b2 float64, t int64) float64 {
	ri, r := rhoInf(b2), Rho(b2, t)
	return math.Sqrt((r - 4) * (r - 2) * ri / ((ri - 4) * (ri - 2) * r))
}

func (c Config) scalars(t int64) scalars {
	c1 := 1 / (1 - math.Pow(c.Beta1, float64(t)))
	k := scalars{
		b1: c.Beta1, omb1: 1 - c.Beta1, b2: c.Beta2, omb2: 1 - c.Beta2,
		lrC1: c.LR * c1,
		c2:   1 / (1 - math.Pow(c.Beta2, float64(t))),
		eps:  c.Eps,
		rect: Rho(c.Beta2, t) >= c.Threshold,
		dec:  c.EMADecay, omDec: 1 - c.EMADecay,
	}
	if k.rect {
		k.rLRC1 = c.LR * Rectifier(c.Beta2, t) * c1
	}
	return k
}

// SetLR changes the learning rate used by the following steps (a
// training-loop schedule calls it before each Step). It returns an error
// for a rate that is not positive and finite, and changes nothing then.
func (o *Optimizer) SetLR(lr float64) error {
	if !(lr > 0) || math.IsInf(lr, 0) {
		return fmt.Errorf("optim: learning rate %v must be positive and finite", lr)
	}
	o.c.cfg.LR = lr
	return nil
}

// StepCount is the number of successful steps taken (or restored).
func (o *Optimizer) StepCount() int64 { return o.c.step }

// EMA returns the EMA shadow of the parameters as tensors named like the
// parameters, for evaluation or export. The data are views of the
// optimiser's state, valid until the next Step or Restore.
func (o *Optimizer) EMA() []safetensors.Tensor {
	out := make([]safetensors.Tensor, len(o.c.ts))
	for i, t := range o.c.ts {
		out[i] = safetensors.Tensor{Name: t.p.Name, Shape: t.p.Shape, Data: t.ema}
	}
	return out
}

// ResetEMA sets the EMA shadow to the current parameter values.
func (o *Optimizer) ResetEMA() {
	for _, t := range o.c.ts {
		copy(t.ema, t.p.Value)
	}
}
