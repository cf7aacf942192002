// Package symbolic implements the additive symbolic-regression model
// families of the PRISM paper (§4.1, App. C.1):
//
//	y(x) = Σ_k M_k g_k(x | θ_k) + ε_m(x | θ_m),
//
// a sum of on/off base functions g_k drawn from a library of 42 unique
// functions (repeated cyclically for large K) plus exactly one of the noise
// models ε_m, observed on the fixed grid x_j = 0.01·j, j = 0…999.
//
// The families symbolic-k15, symbolic-k30, symbolic-k50, symbolic-k80 and
// symbolic-k100 are registered with the family registry; New builds them by
// library size. docs/families/symbolic.md lists every function, noise model
// and prior.
package symbolic

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"

	"github.com/prismsbi/prism/family"
)

// GridN is the number of grid points and GridStep their spacing: the grid
// is x_j = GridStep·j for j = 0…GridN−1, i.e. numpy's arange(0, 10, 0.01).
const (
	GridN    = 1000
	GridStep = 0.01
)

func init() {
	for _, k := range librarySizes {
		family.Register("symbolic-k"+strconv.Itoa(k), func() family.Family {
			f, err := New(k)
			if err != nil {
				panic(err) // unreachable: librarySizes are all valid
			}
			return f
		})
	}
}

// Family is a symbolic-regression model family with K base functions and M
// noise models. It holds no mutable state and is safe for concurrent use.
type Family struct {
	name   string
	k      int
	ids    []int // catalogue ID of every component, in mask order
	comps  []family.Component
	layout *family.Layout
	prior  family.MaskPrior
	pool   sync.Pool // *scratch for LogLikelihood
}

// scratch holds the per-call buffers of LogLikelihood.
type scratch struct {
	mu, e, d2, d3 []float64
}

var _ family.Family = (*Family)(nil)

// New returns the symbolic family with K base functions in the order of the
// paper's basis-library table: the SBMI library with its five noise models
// for K = 15; for any other K ≥ 1 the 42-function library cycled to length
// K with all eight noise models (K = 30, 50, 80, 100 are the paper's).
func New(k int) (*Family, error) {
	base, noise, err := library(k)
	if err != nil {
		return nil, err
	}
	f := &Family{name: "symbolic-k" + strconv.Itoa(k), k: k}
	f.ids = append(base, noise...)
	f.comps = make([]family.Component, len(f.ids))
	for i, id := range f.ids {
		e := &catalogue[id]
		kind := family.Base
		if id >= numBase {
			kind = family.Noise
		}
		params := make([]family.Param, len(e.Bounds))
		for p, b := range e.Bounds {
			params[p] = family.Param{Name: paramNames[p], Unit: "", Prior: priorString(b)}
		}
		f.comps[i] = family.Component{Name: e.Name, Kind: kind, Params: params, Latent: len(params)}
	}
	f.layout = family.NewLayout(f.comps, nil, nil, nil)
	f.prior = family.BernoulliPrior{NumBase: len(base), NumNoise: len(noise), MinActive: 0}
	return f, nil
}

// Name returns the registry name, e.g. "symbolic-k50".
func (f *Family) Name() string { return f.name }

// Description is one line for `prism families`.
func (f *Family) Description() string {
	return fmt.Sprintf("additive symbolic regression, K=%d base functions + %d noise models on a %d-point grid over [0,10)",
		f.k, len(f.ids)-f.k, GridN)
}

// Components lists the K base functions followed by the noise models.
func (f *Family) Components() []family.Component { return f.comps }

// Layout describes θ: one block of 1–3 latents (c1, c2, c3) per component.
func (f *Family) Layout() *family.Layout { return f.layout }

// MaskPrior is Bernoulli(λ) on every base function and a uniform choice of
// one noise model (paper §4.1); the empty base set is allowed.
func (f *Family) MaskPrior() family.MaskPrior { return f.prior }

// Grid returns a fresh copy of the observation grid.
func Grid() []float64 {
	x := make([]float64, GridN)
	for j := range x {
		x[j] = float64(j) * GridStep
	}
	return x
}

// GridDesign returns the fixed design of the symbolic task.
func GridDesign() family.Design {
	return family.Design{N: GridN, CovDim: 1, Cov: Grid(), Name: "grid"}
}

// Designs returns the fixed grid for "" and "grid"; the symbolic task has no
// other designs.
func (f *Family) Designs(spec string) (family.DesignSampler, error) {
	switch spec {
	case "", "grid":
		return family.FixedDesign(GridDesign()), nil
	}
	return nil, fmt.Errorf("symbolic: %s has only the fixed grid design (\"\" or \"grid\"), not %q", f.name, spec)
}

// abscissae returns the x values of a design, which must have one covariate.
func abscissae(d family.Design) []float64 {
	if d.CovDim != 1 {
		panic(fmt.Sprintf("symbolic: design %q has %d covariates per point, want 1 (x)", d.Name, d.CovDim))
	}
	return d.Cov[:d.N]
}

// natural writes the natural parameters of component i for latent θ into c
// and, when dc is non-nil, dc_p/dz_p.
func (f *Family) natural(i int, theta []float64, c, dc *[3]float64) {
	b := f.layout.Blocks[i]
	for p, bd := range catalogue[f.ids[i]].Bounds {
		v, dv := family.Interval(theta[b.Offset+p], bd.Lo, bd.Hi)
		c[p] = v
		if dc != nil {
			dc[p] = dv
		}
	}
}

// noiseComponent returns the index of the single active noise component.
func (f *Family) noiseComponent(mask []bool) int {
	n := -1
	for i := f.k; i < len(f.ids); i++ {
		if mask[i] {
			if n >= 0 {
				panic(fmt.Sprintf("symbolic: mask activates noise models %d and %d; exactly one must be on", n, i))
			}
			n = i
		}
	}
	if n < 0 {
		panic("symbolic: mask activates no noise model; exactly one must be on")
	}
	return n
}

// addForward adds the active base functions on x into out, through the
// uniform-grid recurrences (grid.go) where x allows them.
func (f *Family) addForward(x, theta []float64, mask []bool, out []float64) {
	var c [3]float64
	h := uniformStep(x)
	for i := 0; i < f.k; i++ {
		if mask[i] {
			f.natural(i, theta, &c, nil)
			if h == 0 || !addBasisGrid(f.ids[i], &c, x, h, out) {
				addBasis(f.ids[i], &c, x, out)
			}
		}
	}
}

// Forward writes Σ_k M_k g_k(x_j | θ_k) into out (length d.N).
func (f *Family) Forward(d family.Design, theta []float64, mask []bool, out []float64) {
	x := abscissae(d)
	out = out[:len(x)]
	clear(out)
	f.addForward(x, theta, mask, out)
}

// Simulate writes Forward plus one draw of the active noise model into out:
// out_j = μ_j + √(c1²·e(x_j)² + StdFloor²)·ξ_j with ξ_j ~ N(0,1) drawn in
// grid order.
func (f *Family) Simulate(r *rand.Rand, d family.Design, theta []float64, mask []bool, out []float64) {
	x := abscissae(d)
	out = out[:len(x)]
	n := f.noiseComponent(mask)
	var c [3]float64
	f.natural(n, theta, &c, nil)
	envelope(f.ids[n], &c, x, out)
	c1sq := c[0] * c[0]
	for j, e := range out {
		out[j] = math.Sqrt(c1sq*e*e+StdFloor*StdFloor) * r.NormFloat64()
	}
	f.addForward(x, theta, mask, out)
}

func (f *Family) getScratch(n int) *scratch {
	s, _ := f.pool.Get().(*scratch)
	if s == nil || cap(s.mu) < n {
		s = &scratch{
			mu: make([]float64, n), e: make([]float64, n),
			d2: make([]float64, n), d3: make([]float64, n),
		}
	}
	s.mu, s.e, s.d2, s.d3 = s.mu[:n], s.e[:n], s.d2[:n], s.d3[:n]
	return s
}

// LogLikelihood returns log p(x | θ, M) = Σ_j log N(x_j; μ_j, v_j) with μ
// the forward model and v_j = c1²·e(x_j)² + StdFloor² the variance of the
// active noise model. When grad is non-nil it receives ∂/∂θ (analytic, zero
// on inactive latents).
func (f *Family) LogLikelihood(d family.Design, obs, theta []float64, mask []bool, grad []float64) float64 {
	x := abscissae(d)
	obs = obs[:len(x)]
	s := f.getScratch(len(x))
	defer f.pool.Put(s)

	n := f.noiseComponent(mask)
	var c, dc [3]float64
	f.natural(n, theta, &c, &dc)
	if grad != nil {
		envelopeGrad(f.ids[n], &c, x, s.e, s.d2, s.d3)
	} else {
		envelope(f.ids[n], &c, x, s.e)
	}
	mu := s.mu
	clear(mu)
	f.addForward(x, theta, mask, mu)

	c1 := c[0]
	c1sq := c1 * c1
	const floor2 = StdFloor * StdFloor
	var ll float64
	if grad == nil {
		for j, e := range s.e {
			v := c1sq*e*e + floor2
			r := obs[j] - mu[j]
			ll -= 0.5 * (math.Log(v) + r*r/v)
		}
		return ll - 0.5*float64(len(x))*math.Log(2*math.Pi)
	}

	// Noise parameters: ∂ℓ/∂v_j = (r_j² − v_j)/(2v_j²),
	// ∂v_j/∂c1 = 2c1e_j², ∂v_j/∂c_p = 2c1²e_j ∂e_j/∂c_p (p = 2, 3).
	// Base parameters see the residual weight w_j = r_j/v_j, which
	// overwrites mu.
	var g1, g2, g3 float64
	for j, e := range s.e {
		v := c1sq*e*e + floor2
		r := obs[j] - mu[j]
		iv := 1 / v
		ll -= 0.5 * (math.Log(v) + r*r*iv)
		a := (r*r - v) * iv * iv // 2·∂ℓ/∂v_j
		g1 += a * e * e
		g2 += a * e * s.d2[j]
		g3 += a * e * s.d3[j]
		mu[j] = r * iv
	}
	ll -= 0.5 * float64(len(x)) * math.Log(2*math.Pi)

	clear(grad[:f.layout.DMax])
	nb := f.layout.Blocks[n]
	gn := [3]float64{g1 * c1, g2 * c1sq, g3 * c1sq}
	for p := 0; p < nb.Size; p++ {
		grad[nb.Offset+p] = chain(gn[p], dc[p])
	}
	for i := 0; i < f.k; i++ {
		if !mask[i] {
			continue
		}
		f.natural(i, theta, &c, &dc)
		g := gradBasis(f.ids[i], &c, x, mu)
		b := f.layout.Blocks[i]
		for p := 0; p < b.Size; p++ {
			grad[b.Offset+p] = chain(g[p], dc[p])
		}
	}
	return ll
}

// chain returns g·dv, or 0 when the bijection is flat (dv = 0, a latent at
// ±Inf), where g may be infinite at the edge of the parameter range.
func chain(g, dv float64) float64 {
	if dv == 0 {
		return 0
	}
	return g * dv
}

// Natural returns c1, c2, c3 of every active component (noise included),
// keyed by mask index.
func (f *Family) Natural(theta []float64, mask []bool) family.Params {
	p := family.Params{Components: make(map[int]map[string]float64)}
	var c [3]float64
	for i := range f.ids {
		if !mask[i] {
			continue
		}
		f.natural(i, theta, &c, nil)
		m := make(map[string]float64, len(catalogue[f.ids[i]].Bounds))
		for q := range catalogue[f.ids[i]].Bounds {
			m[paramNames[q]] = c[q]
		}
		p.Components[i] = m
	}
	return p
}

// Latent maps natural parameters back to θ. Every active component needs
// all of its parameters, each inside its closed prior interval (a value on
// an edge maps to a latent of ∓Inf); parameters of inactive components,
// unknown names, shared parameters and fractions are errors.
func (f *Family) Latent(p family.Params, mask []bool) ([]float64, error) {
	if len(mask) != len(f.ids) {
		return nil, fmt.Errorf("symbolic: %s: mask has %d entries, want %d", f.name, len(mask), len(f.ids))
	}
	if len(p.Shared) > 0 || len(p.Fractions) > 0 {
		return nil, fmt.Errorf("symbolic: %s has no shared parameters or fractions", f.name)
	}
	noise := 0
	for i := f.k; i < len(f.ids); i++ {
		if mask[i] {
			noise++
		}
	}
	if noise != 1 {
		return nil, fmt.Errorf("symbolic: %s: mask activates %d noise models, want exactly 1", f.name, noise)
	}
	for i := range p.Components {
		if i < 0 || i >= len(f.ids) {
			return nil, fmt.Errorf("symbolic: %s: component index %d out of range [0,%d)", f.name, i, len(f.ids))
		}
		if !mask[i] {
			return nil, fmt.Errorf("symbolic: %s: parameters given for component %d (%s), which the mask switches off",
				f.name, i, f.comps[i].Name)
		}
	}
	theta := make([]float64, f.layout.DMax)
	for i, id := range f.ids {
		if !mask[i] {
			continue
		}
		e := &catalogue[id]
		vals, ok := p.Components[i]
		if !ok {
			return nil, fmt.Errorf("symbolic: %s: no parameters for active component %d (%s)", f.name, i, e.Name)
		}
		for name := range vals {
			if !validName(name, len(e.Bounds)) {
				return nil, fmt.Errorf("symbolic: %s: component %d (%s) has no parameter %q (it has %v)",
					f.name, i, e.Name, name, paramNames[:len(e.Bounds)])
			}
		}
		b := f.layout.Blocks[i]
		for q, bd := range e.Bounds {
			name := paramNames[q]
			v, ok := vals[name]
			if !ok {
				return nil, fmt.Errorf("symbolic: %s: component %d (%s) is missing parameter %q", f.name, i, e.Name, name)
			}
			if !(v >= bd.Lo && v <= bd.Hi) {
				return nil, fmt.Errorf("symbolic: %s: component %d (%s) parameter %s = %g outside its prior %s",
					f.name, i, e.Name, name, v, priorString(bd))
			}
			theta[b.Offset+q] = family.IntervalInv(v, bd.Lo, bd.Hi)
		}
	}
	return theta, nil
}

func validName(name string, n int) bool {
	for _, p := range paramNames[:n] {
		if p == name {
			return true
		}
	}
	return false
}
