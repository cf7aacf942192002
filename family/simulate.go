package family

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
)

// Sample is one draw (λ, M, θ, design, x) from a family's generative
// process.
type Sample struct {
	Index  uint64    // position in the simulation stream; fixes the random numbers
	Lambda float64   // complexity knob
	Mask   []bool    // length C
	Theta  []float64 // latent θ, length DMax (inactive dimensions are drawn too)
	Design Design    // where x was measured
	X      []float64 // observation, length Design.N
	// LogWeight is log p(θ)/r(θ) when θ came from a training proposal r
	// instead of the prior (SimOptions.Proposal); 0 otherwise.
	LogWeight float64

	covBuf []float64 // reused covariate storage for DesignSamplerInto
	active []bool    // reused latent activity for SimOptions.Proposal
}

// SimOptions configures SimulateBatch.
type SimOptions struct {
	// Seed selects the simulation stream; sample i of the stream depends
	// only on (Seed, i).
	Seed uint64
	// Lambda is the complexity knob for every sample; NaN draws λ ~ U(0,1)
	// per sample, as in training.
	Lambda float64
	// Designs draws each sample's design; nil means the family's default
	// (Family.Designs("")).
	Designs DesignSampler
	// Proposal, if not nil, draws the fraction latents from a defensive
	// mixture instead of the prior and records the importance weight.
	Proposal *FractionProposal
}

// FractionProposal is a training proposal for the mixing fractions of
// families with a simplex (dMRI): with probability Mix the active
// stick-breaking latents of a sample are drawn from N(0, Scale²) instead of
// the prior N(0, 1), which shows fractions far in the prior's tails (a
// strong second fibre under B3S's Dirichlet(3.5, 1, 0.3, 0.1)) more often.
// Each sample records LogWeight = log p(ε)/r(ε) with the mixture
// r = (1−Mix)·p + Mix·N(0, Scale²), so the weight is at most 1/(1−Mix) and
// a loss weighted by it has the prior's expectation: the amortised
// posterior stays the one for the prior.
type FractionProposal struct {
	Scale float64 `json:"scale" yaml:"scale"` // standard deviation of the wide component (> 1)
	Mix   float64 `json:"mix" yaml:"mix"`     // probability of the wide component, in (0, 1)
}

// Validate reports a proposal outside its range.
func (p *FractionProposal) Validate() error {
	if !(p.Scale > 1) || math.IsInf(p.Scale, 0) || !(p.Mix > 0 && p.Mix < 1) {
		return fmt.Errorf("family: fraction proposal scale %v must exceed 1 and mix %v lie in (0, 1)", p.Scale, p.Mix)
	}
	return nil
}

// draw replaces the active fraction latents of theta by the proposal's and
// returns log p/r of the result (active must hold the mask's latent
// activity).
func (p *FractionProposal) draw(r *rand.Rand, theta []float64, active []bool, n int) float64 {
	wide := r.Float64() < p.Mix
	d, q := 0, 0.0
	for j := 0; j < n; j++ {
		if !active[j] {
			continue
		}
		if wide {
			theta[j] *= p.Scale
		}
		d++
		q += theta[j] * theta[j]
	}
	if d == 0 {
		return 0
	}
	// log N(ε; 0, τ²I) − log N(ε; 0, I) = −d log τ + ½|ε|²(1 − 1/τ²).
	lratio := -float64(d)*math.Log(p.Scale) + 0.5*q*(1-1/(p.Scale*p.Scale))
	// log p/r = −log((1−ρ) + ρ·e^lratio) = −log(1−ρ) − softplus(lratio + logit ρ).
	return -math.Log1p(-p.Mix) - softplus(lratio+math.Log(p.Mix/(1-p.Mix)))
}

// splitmix64 is the SplitMix64 finaliser, used to turn (seed, index) pairs
// into well-separated PCG seeds.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// seedPCG seeds p for sample index of stream seed. This is the single
// definition of per-sample seeding: the two PCG seed words are
// s1 = splitmix64(splitmix64(seed) ⊕ index) and s2 = splitmix64(s1).
func seedPCG(p *rand.PCG, seed, index uint64) {
	s1 := splitmix64(splitmix64(seed) ^ index)
	p.Seed(s1, splitmix64(s1))
}

// SampleRNG returns the random source of sample index in stream seed. Every
// random number of that sample (λ, mask, θ, design, noise) comes from it,
// so a sample can be reproduced on its own, independently of batching and
// threads.
func SampleRNG(seed, index uint64) *rand.Rand {
	p := new(rand.PCG)
	seedPCG(p, seed, index)
	return rand.New(p)
}

// SimulateBatch fills out[i] with sample start+i of the stream opt.Seed,
// for every i, in parallel over GOMAXPROCS goroutines. Sample i draws, from
// SampleRNG(opt.Seed, start+i) and in this order: λ (when opt.Lambda is
// NaN), the mask from f.MaskPrior, θ ~ N(0, I_DMax) on all dimensions, the
// design, and the observation noise (f.Simulate). The result therefore does
// not depend on thread timing or on how a stream is split into batches.
//
// Slices already present in out are reused when their capacity suffices,
// so passing the same out again simulates without allocating (apart from
// whatever the design sampler allocates).
func SimulateBatch(f Family, opt SimOptions, start uint64, out []Sample) {
	ds := opt.Designs
	if ds == nil {
		var err error
		ds, err = f.Designs("")
		if err != nil {
			panic(fmt.Sprintf("family: %s has no default design: %v", f.Name(), err))
		}
	}
	C := len(f.Components())
	dmax := f.Layout().DMax
	prior := f.MaskPrior()

	workers := min(runtime.GOMAXPROCS(0), len(out))
	if workers <= 1 {
		simulateRange(f, prior, ds, opt, C, dmax, start, out)
		return
	}
	var wg sync.WaitGroup
	chunk := (len(out) + workers - 1) / workers
	for lo := 0; lo < len(out); lo += chunk {
		hi := min(lo+chunk, len(out))
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			simulateRange(f, prior, ds, opt, C, dmax, start+uint64(lo), out[lo:hi])
		}(lo, hi)
	}
	wg.Wait()
}

func simulateRange(f Family, prior MaskPrior, ds DesignSampler, opt SimOptions, C, dmax int, start uint64, out []Sample) {
	var pcg rand.PCG
	r := rand.New(&pcg)
	for i := range out {
		s := &out[i]
		s.Index = start + uint64(i)
		seedPCG(&pcg, opt.Seed, s.Index)
		s.Lambda = opt.Lambda
		if math.IsNaN(s.Lambda) {
			s.Lambda = r.Float64()
		}
		s.Mask = resize(s.Mask, C)
		prior.Sample(r, s.Lambda, s.Mask)
		s.Theta = resize(s.Theta, dmax)
		for j := range s.Theta {
			s.Theta[j] = r.NormFloat64()
		}
		s.LogWeight = 0
		if opt.Proposal != nil {
			if lay := f.Layout(); lay.FractionLatents() > 0 {
				s.active = resize(s.active, dmax)
				lay.Active(s.Mask, s.active)
				s.LogWeight = opt.Proposal.draw(r, s.Theta, s.active, lay.FractionLatents())
			}
		}
		if into, ok := ds.(DesignSamplerInto); ok {
			s.covBuf = resize(s.covBuf, into.CovLen())
			s.Design = into.SampleDesignInto(r, s.covBuf)
		} else {
			s.Design = ds.SampleDesign(r)
		}
		s.X = resize(s.X, s.Design.N)
		f.Simulate(r, s.Design, s.Theta, s.Mask, s.X)
	}
}

// resize returns s with length n, reusing its storage when possible.
func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// MaskString renders a mask as a string of '0' and '1' in component order.
func MaskString(mask []bool) string {
	var b strings.Builder
	b.Grow(len(mask))
	for _, on := range mask {
		if on {
			b.WriteByte('1')
		} else {
			b.WriteByte('0')
		}
	}
	return b.String()
}

// ParseMask parses a string of C characters '0'/'1' (as written by
// MaskString) into a mask.
func ParseMask(s string, C int) ([]bool, error) {
	if len(s) != C {
		return nil, fmt.Errorf("family: mask %q has %d entries, want %d (one per component)", s, len(s), C)
	}
	mask := make([]bool, C)
	for i := 0; i < C; i++ {
		switch s[i] {
		case '0':
		case '1':
			mask[i] = true
		default:
			return nil, fmt.Errorf("family: mask %q: character %d is %q, want '0' or '1'", s, i, s[i])
		}
	}
	return mask, nil
}

// ActiveCount returns the number of true entries of mask.
func ActiveCount(mask []bool) int {
	n := 0
	for _, on := range mask {
		if on {
			n++
		}
	}
	return n
}

// LogPriorLatent returns the standard-normal log density of the active
// dimensions of θ: Σ_{i active} (−θ_i²/2 − log(2π)/2).
func LogPriorLatent(theta []float64, active []bool) float64 {
	lp := 0.0
	for i, a := range active {
		if a {
			lp -= 0.5*theta[i]*theta[i] + 0.5*math.Log(2*math.Pi)
		}
	}
	return lp
}

// GradLogPriorLatent writes ∂/∂θ LogPriorLatent into grad: −θ_i on active
// dimensions, 0 elsewhere.
func GradLogPriorLatent(theta []float64, active []bool, grad []float64) {
	for i, a := range active {
		if a {
			grad[i] = -theta[i]
		} else {
			grad[i] = 0
		}
	}
}

// MaskLabel names the components a mask switches on, joined by "+"
// ("(none)" for the empty mask): a short model label for tables and
// figures.
func MaskLabel(f Family, mask []bool) string {
	var s []string
	for k, c := range f.Components() {
		if mask[k] {
			s = append(s, c.Name)
		}
	}
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, "+")
}

// BaseCount is the number of base (non-noise) components a mask switches
// on: the model size a complexity sweep reports.
func BaseCount(f Family, mask []bool) int {
	n := 0
	for k, c := range f.Components() {
		if mask[k] && c.Kind == Base {
			n++
		}
	}
	return n
}
