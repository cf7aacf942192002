// Package lingauss implements lingauss-k6, a linear-Gaussian validation
// family whose evidence, model posterior and parameter posterior are known
// in closed form. Later stages of prism (training, posterior sampling,
// evaluation) are checked against it.
//
// The model, on the fixed grid x_j = j/10, j = 0…99 (100 points on [0,10)):
//
//	y_j = Σ_k M_k θ_k φ_k(x_j) + σ ε_j,   θ_k ~ N(0,1),  ε_j ~ N(0,1),
//
// with the six basis functions
//
//	φ_0 = 1, φ_1 = x/10, φ_2 = (x/10)², φ_3 = sin x, φ_4 = cos x,
//	φ_5 = exp(−(x−5)²/2)
//
// and σ = Sigma = 0.5. The constant, linear and quadratic terms are strongly
// correlated on the grid (correlation of the basis vectors 0.74–0.97) and the
// bump overlaps all three (0.35–0.60) and the sine (−0.50), so several masks
// explain the same data nearly equally well; sine and cosine are almost
// orthogonal to the rest and are identified once |θ| ≳ 0.2. With σ = 0.5 and
// λ = 0.5, over simulated data the most probable mask has posterior
// probability 0.34 on average, the true mask 0.19, and the posterior
// entropy is 2.2 nats (of log 64 = 4.16): neither trivially sharp nor flat
// (σ = 1.5 gives 0.14 / 0.06 / 3.2 nats, σ = 0.3 gives 0.46 / 0.29 / 1.7).
// The single noise component "Gaussian" has no parameters and is always
// on. θ is the natural parameter itself (identity
// bijection), so latent and natural values coincide.
//
// Masks index the 7 components in order Const, Linear, Quadratic, Sine,
// Cosine, Bump, Gaussian. ModelPosterior indexes the 64 base-component masks
// by the integer Σ_k M_k 2^k (bit k = base component k).
package lingauss

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/prismsbi/prism/family"
)

// Name is the registry name of the family.
const Name = "lingauss-k6"

// Family constants: K base functions, N grid points with spacing Step, and
// the known noise standard deviation Sigma.
const (
	K     = 6
	N     = 100
	Step  = 0.1
	Sigma = 0.5
	// NumMasks is the number of base-component masks, 2^K.
	NumMasks = 1 << K
)

// baseNames are the component names in mask order.
var baseNames = [K]string{"Const", "Linear", "Quadratic", "Sine", "Cosine", "Bump"}

// ParamName is the name of each base component's single parameter in JSON
// parameter files.
const ParamName = "c1"

func init() {
	family.Register(Name, func() family.Family { return New() })
}

// Basis returns φ_k(x).
func Basis(k int, x float64) float64 {
	switch k {
	case 0:
		return 1
	case 1:
		return x / 10
	case 2:
		return (x / 10) * (x / 10)
	case 3:
		return math.Sin(x)
	case 4:
		return math.Cos(x)
	case 5:
		return math.Exp(-0.5 * (x - 5) * (x - 5))
	}
	panic(fmt.Sprintf("lingauss: basis index %d out of range [0,%d)", k, K))
}

// Family is lingauss-k6. It holds only read-only precomputed tables and is
// safe for concurrent use.
type Family struct {
	comps  []family.Component
	layout *family.Layout
	prior  family.BernoulliPrior
	grid   []float64     // x_j
	phi    [K][N]float64 // φ_k(x_j)
	gram   [K][K]float64 // Σ_j φ_k(x_j) φ_l(x_j)
	design family.Design // the grid design
}

var _ family.Family = (*Family)(nil)

// New returns the lingauss-k6 family.
func New() *Family {
	f := &Family{prior: family.BernoulliPrior{NumBase: K, NumNoise: 1}}
	for k := 0; k < K; k++ {
		f.comps = append(f.comps, family.Component{
			Name:   baseNames[k],
			Kind:   family.Base,
			Params: []family.Param{{Name: ParamName, Prior: "N(0,1)"}},
			Latent: 1,
		})
	}
	f.comps = append(f.comps, family.Component{Name: "Gaussian", Kind: family.Noise})
	f.layout = family.NewLayout(f.comps, nil, nil, nil)
	f.grid = Grid()
	for k := 0; k < K; k++ {
		for j, x := range f.grid {
			f.phi[k][j] = Basis(k, x)
		}
	}
	for k := 0; k < K; k++ {
		for l := 0; l < K; l++ {
			s := 0.0
			for j := 0; j < N; j++ {
				s += f.phi[k][j] * f.phi[l][j]
			}
			f.gram[k][l] = s
		}
	}
	f.design = family.Design{N: N, CovDim: 1, Cov: f.grid, Name: "grid"}
	return f
}

// Grid returns a fresh copy of the observation grid x_j = j/10, j = 0…99.
func Grid() []float64 {
	x := make([]float64, N)
	for j := range x {
		x[j] = float64(j) * Step
	}
	return x
}

// Name returns "lingauss-k6".
func (f *Family) Name() string { return Name }

// Description is one line for `prism families`.
func (f *Family) Description() string {
	return "linear-Gaussian validation family: 6 fixed basis functions, θ_k ~ N(0,1), σ = 0.5, 100-point grid on [0,10); exact evidence and posteriors"
}

// Components lists the six base functions and the Gaussian noise.
func (f *Family) Components() []family.Component { return f.comps }

// Layout: one latent per base function, none for the noise (DMax = 6).
func (f *Family) Layout() *family.Layout { return f.layout }

// MaskPrior is Bernoulli(λ) on the six base functions; the noise component
// is always on.
func (f *Family) MaskPrior() family.MaskPrior { return f.prior }

// GridDesign returns the fixed design of the family (shared, read-only
// storage; do not modify its Cov).
func (f *Family) GridDesign() family.Design { return f.design }

// Designs returns the fixed grid for "" and "grid".
func (f *Family) Designs(spec string) (family.DesignSampler, error) {
	switch spec {
	case "", "grid":
		return family.FixedDesign(f.design), nil
	}
	return nil, fmt.Errorf("lingauss: %s has only the fixed grid design (\"\" or \"grid\"), not %q", Name, spec)
}

// onGrid reports whether d is the family's grid (its own storage, or
// another copy with the same values, as read from a file), for which the
// basis is tabulated: comparing 100 values costs less than evaluating
// the basis once.
func (f *Family) onGrid(d family.Design) bool {
	if d.N != N || d.CovDim != 1 || len(d.Cov) < N {
		return false
	}
	if &d.Cov[0] == &f.grid[0] {
		return true
	}
	for j, x := range f.grid {
		if d.Cov[j] != x {
			return false
		}
	}
	return true
}

// basisAt returns φ_k at measurement j of design d.
func (f *Family) basisAt(d family.Design, grid bool, k, j int) float64 {
	if grid {
		return f.phi[k][j]
	}
	return Basis(k, d.Cov[j*d.CovDim])
}

// Forward writes Σ_k M_k θ_k φ_k(x_j) into out. Any design with one
// covariate (x) is accepted; the family's grid uses tabulated basis values.
func (f *Family) Forward(d family.Design, theta []float64, mask []bool, out []float64) {
	grid := f.onGrid(d)
	for j := range out[:d.N] {
		out[j] = 0
	}
	for k := 0; k < K; k++ {
		if !mask[k] {
			continue
		}
		for j := 0; j < d.N; j++ {
			out[j] += theta[k] * f.basisAt(d, grid, k, j)
		}
	}
}

// Simulate writes Forward plus N(0, σ²) noise into out.
func (f *Family) Simulate(r *rand.Rand, d family.Design, theta []float64, mask []bool, out []float64) {
	f.Forward(d, theta, mask, out)
	for j := 0; j < d.N; j++ {
		out[j] += Sigma * r.NormFloat64()
	}
}

// LogLikelihood returns Σ_j log N(x_j; μ_j, σ²) with μ = Forward(θ) and, when
// grad is non-nil, ∂/∂θ_k = M_k Σ_j (x_j − μ_j) φ_k(x_j) / σ².
func (f *Family) LogLikelihood(d family.Design, x, theta []float64, mask []bool, grad []float64) float64 {
	grid := f.onGrid(d)
	if grad != nil {
		for i := range grad[:K] {
			grad[i] = 0
		}
	}
	ss := 0.0
	for j := 0; j < d.N; j++ {
		mu := 0.0
		for k := 0; k < K; k++ {
			if mask[k] {
				mu += theta[k] * f.basisAt(d, grid, k, j)
			}
		}
		r := x[j] - mu
		ss += r * r
		if grad != nil {
			for k := 0; k < K; k++ {
				if mask[k] {
					grad[k] += r * f.basisAt(d, grid, k, j) / (Sigma * Sigma)
				}
			}
		}
	}
	return -0.5*ss/(Sigma*Sigma) - float64(d.N)*(math.Log(Sigma)+0.5*math.Log(2*math.Pi))
}

// Natural returns c1 = θ_k for every active base component.
func (f *Family) Natural(theta []float64, mask []bool) family.Params {
	p := family.Params{Components: make(map[int]map[string]float64)}
	for k := 0; k < K; k++ {
		if mask[k] {
			p.Components[k] = map[string]float64{ParamName: theta[k]}
		}
	}
	return p
}

// Latent returns θ for natural parameters p: every active base component
// needs its c1; parameters for inactive components or the noise component,
// unknown names, shared parameters and fractions are errors.
func (f *Family) Latent(p family.Params, mask []bool) ([]float64, error) {
	if len(mask) != K+1 {
		return nil, fmt.Errorf("lingauss: mask has %d entries, want %d", len(mask), K+1)
	}
	if !mask[K] {
		return nil, fmt.Errorf("lingauss: mask must switch on the noise component %d (Gaussian)", K)
	}
	if len(p.Shared) > 0 || len(p.Fractions) > 0 {
		return nil, fmt.Errorf("lingauss: %s has no shared parameters or fractions", Name)
	}
	for i, vals := range p.Components {
		switch {
		case i < 0 || i > K:
			return nil, fmt.Errorf("lingauss: component index %d out of range [0,%d)", i, K+1)
		case i == K && len(vals) > 0:
			return nil, fmt.Errorf("lingauss: component %d (Gaussian) has no parameters", K)
		case i < K && !mask[i]:
			return nil, fmt.Errorf("lingauss: parameters given for component %d (%s), which the mask switches off", i, baseNames[i])
		}
		for name := range vals {
			if name != ParamName {
				return nil, fmt.Errorf("lingauss: component %d (%s) has no parameter %q (it has [%s])", i, baseNames[i], name, ParamName)
			}
		}
	}
	theta := make([]float64, K)
	for k := 0; k < K; k++ {
		if !mask[k] {
			continue
		}
		v, ok := p.Components[k][ParamName]
		if !ok {
			return nil, fmt.Errorf("lingauss: active component %d (%s) is missing parameter %q", k, baseNames[k], ParamName)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("lingauss: component %d (%s) parameter %s = %g is not finite", k, baseNames[k], ParamName, v)
		}
		theta[k] = v
	}
	return theta, nil
}

// The family's closed forms (exact.go) are what evaluation compares
// networks with.
var _ family.ExactPosterior = (*Family)(nil)
