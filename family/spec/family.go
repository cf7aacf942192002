package spec

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"sync"

	"github.com/prismsbi/prism/family"
)

// Family is a model family built from a spec file. It is safe for
// concurrent use; an external simulator's worker processes start on the
// first simulation and stop with Close.
type Family struct {
	file File
	text []byte // the spec file as read, stored in checkpoints
	dir  string // its directory

	comps        []family.Component
	priors       [][]paramPrior // per component, per natural value (= latent)
	shared       []family.Param
	sharedPriors []paramPrior
	stick        family.StickBreaking
	layout       *family.Layout
	prior        family.MaskPrior
	spaceSize    *big.Int      // nil: family.ModelSpaceSize's rule applies
	grid         []float64     // fixed grid (nil with per-observation designs)
	design       family.Design // the fixed grid's design
	covariate    *covariate    // per-observation designs, nil for a fixed grid

	// Built-in additive simulator: env slots are x, mu, the shared
	// values, one fraction per component, then each component's values
	// from compOff[k].
	terms   []expr // per component; nil for none
	noises  []expr // per component; nil for base components
	compOff []int
	envLen  int
	envPool sync.Pool

	ext *pool // external simulator, nil for the built-in one
}

var (
	_ family.Family          = (*Family)(nil)
	_ family.ModelSpaceSizer = (*Family)(nil)
)

const (
	slotX  = 0
	slotMu = 1
)

// SpecText returns the spec file's text (family.SpecSource).
func (f *Family) SpecText() []byte { return f.text }

// SpecDir returns the directory relative simulator paths resolve against.
func (f *Family) SpecDir() string { return f.dir }

// External reports whether observations come from an external program.
func (f *Family) External() bool { return f.ext != nil }

// Close stops an external simulator's worker processes (a no-op
// otherwise). Simulating again restarts them.
func (f *Family) Close() error {
	if f.ext != nil {
		f.ext.close()
	}
	return nil
}

// Name is the spec's name.
func (f *Family) Name() string { return f.file.Name }

// Description is the spec's description, or a summary.
func (f *Family) Description() string {
	if f.file.Description != "" {
		return f.file.Description
	}
	if f.covariate != nil {
		return fmt.Sprintf("family from a spec file: %d components, %d values per observation at its own %s", len(f.comps), f.covariate.n, f.covariate.name)
	}
	return fmt.Sprintf("family from a spec file: %d components, %d-point grid", len(f.comps), len(f.grid))
}

// Components lists the components in mask order.
func (f *Family) Components() []family.Component { return f.comps }

// Layout describes θ.
func (f *Family) Layout() *family.Layout { return f.layout }

// MaskPrior is p(M | λ).
func (f *Family) MaskPrior() family.MaskPrior { return f.prior }

// ModelSpaceSize is the number of masks with positive prior probability.
func (f *Family) ModelSpaceSize() *big.Int {
	if f.spaceSize != nil {
		return new(big.Int).Set(f.spaceSize)
	}
	K, M := family.Counts(f)
	base := new(big.Int).Lsh(big.NewInt(1), uint(K))
	if p, ok := f.prior.(family.BernoulliPrior); ok {
		for i := 0; i < min(p.MinActive, K+1); i++ {
			base.Sub(base, new(big.Int).Binomial(int64(K), int64(i)))
		}
	}
	return base.Mul(base, big.NewInt(int64(M)))
}

// Grid returns the observation grid (shared storage: do not modify).
func (f *Family) Grid() []float64 { return f.grid }

// Designs returns the fixed grid for "" and "grid", or with
// per-observation designs the sampler of training designs for "".
func (f *Family) Designs(name string) (family.DesignSampler, error) {
	if f.covariate != nil {
		if name == "" || name == f.covariate.name {
			return covariateDesigns{f.covariate}, nil
		}
		return nil, fmt.Errorf("spec: %s draws a design per observation (\"\"), not %q; give observations their %s values", f.Name(), name, f.covariate.name)
	}
	if name == "" || name == "grid" {
		return family.FixedDesign(f.design), nil
	}
	return nil, fmt.Errorf("spec: %s has only its fixed grid design (\"\" or \"grid\"), not %q", f.Name(), name)
}

// numBase is the number of base components.
func (f *Family) numBase() int {
	K, _ := family.Counts(f)
	return K
}

// fillEnv writes the natural values of the active components, the shared
// values and the fractions into env (inactive components' values NaN).
func (f *Family) fillEnv(theta []float64, mask []bool, env []float64) {
	S := len(f.shared)
	off := f.layout.SharedOffset()
	for i := range f.sharedPriors {
		env[2+i] = f.sharedPriors[i].natural(theta[off+i])
	}
	for k := range f.comps {
		env[2+S+k] = 0
	}
	if n := len(f.layout.Simplex); n > 0 {
		var on [family.MaxSimplex]bool
		var pi [family.MaxSimplex]float64
		for i, k := range f.layout.Simplex {
			on[i] = mask[k]
		}
		f.stick.Fractions(theta[:n-1], on[:n], pi[:n])
		for i, k := range f.layout.Simplex {
			env[2+S+k] = pi[i]
		}
	}
	for k := range f.comps {
		b := f.layout.Blocks[k]
		for j := range f.priors[k] {
			v := math.NaN()
			if mask[k] {
				v = f.priors[k][j].natural(theta[b.Offset+j])
			}
			env[f.compOff[k]+j] = v
		}
	}
}

// Natural maps latent θ to natural parameters of the active components.
func (f *Family) Natural(theta []float64, mask []bool) family.Params {
	env := make([]float64, f.envLen)
	f.fillEnv(theta, mask, env)
	p := family.Params{Components: map[int]map[string]float64{}}
	for k, c := range f.comps {
		if !mask[k] || len(c.Params) == 0 {
			continue
		}
		vals := make(map[string]float64, len(c.Params))
		for j, prm := range c.Params {
			vals[prm.Name] = env[f.compOff[k]+j]
		}
		p.Components[k] = vals
	}
	if len(f.shared) > 0 {
		p.Shared = map[string]float64{}
		for i, prm := range f.shared {
			p.Shared[prm.Name] = env[2+i]
		}
	}
	for _, k := range f.layout.Simplex {
		p.Fractions = append(p.Fractions, env[2+len(f.shared)+k])
	}
	return p
}

// Latent maps natural parameters back to latent θ (inactive dims zero).
func (f *Family) Latent(p family.Params, mask []bool) ([]float64, error) {
	if err := family.CheckMask(f, mask); err != nil {
		return nil, fmt.Errorf("spec: %s: %w", f.Name(), err)
	}
	theta := make([]float64, f.layout.DMax)
	for k, vals := range p.Components {
		if k < 0 || k >= len(f.comps) {
			return nil, fmt.Errorf("spec: %s: component index %d out of range [0,%d)", f.Name(), k, len(f.comps))
		}
		if !mask[k] && len(vals) > 0 {
			return nil, fmt.Errorf("spec: %s: parameters given for component %d (%s), which the mask switches off", f.Name(), k, f.comps[k].Name)
		}
		for name := range vals {
			if !hasParam(f.comps[k].Params, name) {
				return nil, fmt.Errorf("spec: %s: component %d (%s) has no parameter %q", f.Name(), k, f.comps[k].Name, name)
			}
		}
	}
	for k, c := range f.comps {
		if !mask[k] {
			continue
		}
		for j, prm := range c.Params {
			v, ok := p.Components[k][prm.Name]
			if !ok {
				return nil, fmt.Errorf("spec: %s: active component %d (%s) is missing parameter %q", f.Name(), k, c.Name, prm.Name)
			}
			z, err := f.priors[k][j].latent(v)
			if err != nil {
				return nil, fmt.Errorf("spec: %s: component %d (%s) parameter %s: %w", f.Name(), k, c.Name, prm.Name, err)
			}
			theta[f.layout.Blocks[k].Offset+j] = z
		}
	}
	for name := range p.Shared {
		if !hasParam(f.shared, name) {
			return nil, fmt.Errorf("spec: %s: no shared parameter %q", f.Name(), name)
		}
	}
	for i, prm := range f.shared {
		v, ok := p.Shared[prm.Name]
		if !ok {
			return nil, fmt.Errorf("spec: %s: shared parameter %q is missing", f.Name(), prm.Name)
		}
		z, err := f.sharedPriors[i].latent(v)
		if err != nil {
			return nil, fmt.Errorf("spec: %s: shared parameter %s: %w", f.Name(), prm.Name, err)
		}
		theta[f.layout.SharedOffset()+i] = z
	}
	n := len(f.layout.Simplex)
	switch {
	case n == 0 && len(p.Fractions) > 0:
		return nil, fmt.Errorf("spec: %s has no fractions", f.Name())
	case n > 0:
		if len(p.Fractions) != n {
			return nil, fmt.Errorf("spec: %s: want %d fractions (one per simplex component), got %d", f.Name(), n, len(p.Fractions))
		}
		on := make([]bool, n)
		sum := 0.0
		for i, k := range f.layout.Simplex {
			on[i] = mask[k]
			v := p.Fractions[i]
			if v < 0 || (!on[i] && v != 0) || math.IsNaN(v) {
				return nil, fmt.Errorf("spec: %s: fraction %d = %v must be ≥ 0, and 0 for an inactive component", f.Name(), i, v)
			}
			sum += v
		}
		if math.Abs(sum-1) > 1e-6 && sum != 0 {
			return nil, fmt.Errorf("spec: %s: fractions sum to %v, want 1", f.Name(), sum)
		}
		f.stick.Inverse(p.Fractions, on, theta[:n-1])
	}
	return theta, nil
}

func hasParam(ps []family.Param, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// compileAdditive compiles the terms and noise expressions of the
// built-in additive simulator.
func (f *Family) compileAdditive() error {
	S, C := len(f.shared), len(f.comps)
	simplex := map[int]bool{}
	for _, k := range f.layout.Simplex {
		simplex[k] = true
	}
	f.terms = make([]expr, C)
	f.noises = make([]expr, C)
	for k, c := range f.file.Components {
		vars := map[string]int{"x": slotX}
		if f.covariate != nil {
			vars[f.covariate.name] = slotX // x stays an alias
		}
		for i, p := range f.shared {
			if _, clash := vars[p.Name]; clash {
				return fmt.Errorf("shared parameter %q has the name of the covariate", p.Name)
			}
			vars[p.Name] = 2 + i
		}
		if simplex[k] {
			vars["fraction"] = 2 + S + k
		}
		for j, p := range f.comps[k].Params {
			if f.covariate != nil && (p.Name == f.covariate.name || p.Name == "x") {
				return fmt.Errorf("component %q: parameter %q has the name of the covariate", c.Name, p.Name)
			}
			vars[p.Name] = f.compOff[k] + j
		}
		if f.comps[k].Kind == family.Base {
			if c.Noise != "" {
				return fmt.Errorf("component %q: noise is for noise components; base components give a term", c.Name)
			}
			if c.Term == "" {
				return fmt.Errorf("component %q: the additive simulator needs a term (its contribution to the mean)", c.Name)
			}
			e, _, err := compile(c.Term, vars)
			if err != nil {
				return fmt.Errorf("component %q term: %w", c.Name, err)
			}
			f.terms[k] = e
			continue
		}
		if c.Term != "" {
			return fmt.Errorf("component %q: noise components give noise (a standard deviation), not a term", c.Name)
		}
		if c.Noise == "" {
			return fmt.Errorf("component %q: the additive simulator needs noise (the Gaussian standard deviation)", c.Name)
		}
		vars["mu"] = slotMu
		e, _, err := compile(c.Noise, vars)
		if err != nil {
			return fmt.Errorf("component %q noise: %w", c.Name, err)
		}
		f.noises[k] = e
	}
	return nil
}

// layoutEnv places the natural values in the environment slots shared by
// Natural and the additive simulator.
func (f *Family) layoutEnv() {
	S, C := len(f.shared), len(f.comps)
	f.compOff = make([]int, C)
	off := 2 + S + C
	for k := range f.comps {
		f.compOff[k] = off
		off += len(f.comps[k].Params)
	}
	f.envLen = off
	f.envPool.New = func() any { s := make([]float64, f.envLen); return &s }
}

// Forward writes the noiseless mean Σ_active terms at every grid point.
// An external simulator has no noiseless mode: out is NaN.
func (f *Family) Forward(d family.Design, theta []float64, mask []bool, out []float64) {
	if f.ext != nil {
		for j := range out[:d.N] {
			out[j] = math.NaN()
		}
		return
	}
	ep := f.envPool.Get().(*[]float64)
	env := *ep
	f.fillEnv(theta, mask, env)
	f.forward(d, env, mask, out)
	f.envPool.Put(ep)
}

func (f *Family) forward(d family.Design, env []float64, mask []bool, out []float64) {
	for j := 0; j < d.N; j++ {
		env[slotX] = d.Cov[j*d.CovDim]
		mu := 0.0
		for k, t := range f.terms {
			if t != nil && mask[k] {
				mu += t.eval(env)
			}
		}
		out[j] = mu
	}
}

// Simulate writes a noisy observation into out. The additive simulator
// adds N(0, sd²) noise with sd the active noise component's expression; an
// external simulator simulates a batch of one (NaN on failure; training
// uses TrySimulateBatch, which reports failures).
func (f *Family) Simulate(r *rand.Rand, d family.Design, theta []float64, mask []bool, out []float64) {
	if f.ext != nil {
		s := []family.Sample{{Mask: mask, Theta: theta, Design: d, X: out[:d.N], SimSeed: r.Uint64()}}
		bad := []bool{false}
		if err := f.ext.simulate(s, bad); err != nil || bad[0] {
			for j := range out[:d.N] {
				out[j] = math.NaN()
			}
		}
		return
	}
	ep := f.envPool.Get().(*[]float64)
	env := *ep
	f.fillEnv(theta, mask, env)
	f.forward(d, env, mask, out)
	k := f.activeNoise(mask)
	for j := 0; j < d.N; j++ {
		env[slotX], env[slotMu] = d.Cov[j*d.CovDim], out[j]
		out[j] += f.noises[k].eval(env) * r.NormFloat64()
	}
	f.envPool.Put(ep)
}

func (f *Family) activeNoise(mask []bool) int {
	for k, e := range f.noises {
		if e != nil && mask[k] {
			return k
		}
	}
	panic(fmt.Sprintf("spec: %s: mask %s has no active noise component", f.Name(), family.MaskString(mask)))
}

// External is a spec family whose observations come from an external
// program: a family.BatchSimulator, so that training hands it whole
// batches and survives its failures. (A built-in simulator's family is a
// plain *Family, whose simulations match a built-in Go family's draw for
// draw.)
type External struct{ *Family }

var _ family.BatchSimulator = External{}

// SimulateSamples runs the external simulator on a batch.
func (e External) SimulateSamples(samples []family.Sample, bad []bool) error {
	return e.ext.simulate(samples, bad)
}

// MaxRedraws is the spec's retries.
func (e External) MaxRedraws() int { return e.ext.retries }

// HasLikelihood is false: an external program gives simulations only
// (family.LikelihoodReporter).
func (e External) HasLikelihood() bool { return false }

func finite(x []float64) bool {
	for _, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// errNoLikelihood is returned (as NaN) for external simulators.
var errNoLikelihood = errors.New("an external simulator has no likelihood")

// LogLikelihood returns Σ_j log N(x_j; μ_j, sd_j²) of the additive
// simulator. The gradient with respect to the latent θ is by central
// differences (step 1e−5, relative error ≈ 1e−9 for smooth terms), zero on
// inactive dimensions. An external simulator has no likelihood: NaN.
func (f *Family) LogLikelihood(d family.Design, x, theta []float64, mask []bool, grad []float64) float64 {
	if f.ext != nil {
		for i := range grad {
			grad[i] = math.NaN()
		}
		_ = errNoLikelihood
		return math.NaN()
	}
	ll := f.logLik(d, x, theta, mask)
	if grad == nil {
		return ll
	}
	active := make([]bool, f.layout.DMax)
	f.layout.Active(mask, active)
	th := append([]float64(nil), theta...)
	const h = 1e-5
	for i := range grad {
		grad[i] = 0
		if !active[i] {
			continue
		}
		th[i] = theta[i] + h
		up := f.logLik(d, x, th, mask)
		th[i] = theta[i] - h
		down := f.logLik(d, x, th, mask)
		th[i] = theta[i]
		grad[i] = (up - down) / (2 * h)
	}
	return ll
}

func (f *Family) logLik(d family.Design, x, theta []float64, mask []bool) float64 {
	ep := f.envPool.Get().(*[]float64)
	env := *ep
	defer f.envPool.Put(ep)
	f.fillEnv(theta, mask, env)
	k := f.activeNoise(mask)
	ll := 0.0
	for j := 0; j < d.N; j++ {
		env[slotX] = d.Cov[j*d.CovDim]
		mu := 0.0
		for c, t := range f.terms {
			if t != nil && mask[c] {
				mu += t.eval(env)
			}
		}
		env[slotMu] = mu
		sd := f.noises[k].eval(env)
		r := (x[j] - mu) / sd
		ll -= 0.5*r*r + math.Log(sd) + 0.5*math.Log(2*math.Pi)
	}
	return ll
}
