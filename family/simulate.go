package family

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"

	"github.com/prismsbi/prism/internal/seeds"
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
	// SimSeed seeds an external simulator's noise for this sample
	// (TrySimulateBatch with a BatchSimulator); 0 otherwise.
	SimSeed uint64

	covBuf []float64 // reused covariate storage for DesignSamplerInto
	active []bool    // reused latent activity for SimOptions.Proposal
}

// SimOptions configures SimulateBatch.
type SimOptions struct {
	// Seed selects the simulation stream; sample i of the stream depends
	// only on (Seed, i).
	Seed uint64
	// Lambda is the complexity knob for every sample; NaN draws λ per
	// sample from LambdaDist, as in training.
	Lambda float64
	// LambdaDist is the distribution of λ when Lambda is NaN; the zero
	// value is the paper's U(0, 1).
	LambdaDist LambdaDist
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

// seedPCG seeds p for sample index of stream seed. This is the single
// definition of per-sample seeding: the two PCG seed words are
// s1 = Mix(Mix(seed) ⊕ index) and s2 = Mix(s1) (Mix: internal/seeds).
func seedPCG(p *rand.PCG, seed, index uint64) {
	s1 := seeds.Mix(seeds.Mix(seed) ^ index)
	p.Seed(s1, seeds.Mix(s1))
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
// NaN, from opt.LambdaDist), the mask from f.MaskPrior, θ ~ N(0, I_DMax)
// on all dimensions, the design, and the observation noise (f.Simulate);
// a Canonicalizer family relabels (θ, mask) before the design is drawn. The result therefore does
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
			s.Lambda = opt.LambdaDist.Sample(r)
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
		canonicalize(f, s)
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

// Canonicalizer is implemented by families with exchangeable components
// (the sticks of ball-and-sticks with equal Dirichlet concentrations), whose
// parameter posterior is therefore symmetric under relabelling them and
// multimodal. Canonicalize maps a prior draw (θ, mask) in place to one
// representative of its relabelling class with the same likelihood (for
// example the active sticks first, by decreasing fraction), so that the
// network is trained on, and learns, the posterior of the representative:
// one mode instead of k! copies. SimulateBatch and TrySimulateBatch call it
// after drawing θ and the mask and before simulating; it draws no random
// numbers and must not change the likelihood of any observation.
type Canonicalizer interface {
	Canonicalize(theta []float64, mask []bool)
}

// canonicalize applies f's Canonicalizer, if any, to s's θ and mask.
func canonicalize(f Family, s *Sample) {
	if c, ok := f.(Canonicalizer); ok {
		c.Canonicalize(s.Theta, s.Mask)
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

// MaskCode is the bit code Σ_k M_k 2^k of a mask of at most 32
// components (component 0 the lowest bit).
func MaskCode(mask []bool) uint32 {
	var code uint32
	for k, on := range mask {
		if on {
			code |= 1 << k
		}
	}
	return code
}

// MaskFromCode writes the mask whose bit code (MaskCode) is code into
// mask, one bit per element: mask[k] = bit k of code. It allocates
// nothing, for loops over all masks of a family.
func MaskFromCode(code uint32, mask []bool) {
	for k := range mask {
		mask[k] = code>>k&1 == 1
	}
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

// BatchSimulator is implemented by families whose simulator runs outside
// the process on whole batches and can fail: the external simulators of
// family/spec. TrySimulateBatch draws λ, M, θ and the design of every
// sample as usual, gives each sample a simulator seed (the next Uint64 of
// its random source) and hands the batch to SimulateSamples instead of
// calling Simulate sample by sample.
type BatchSimulator interface {
	// SimulateSamples fills X of every sample (length Design.N). It sets
	// bad[i] when sample i's observation is unusable (a NaN or infinite
	// value) and returns an error only when the batch as a whole failed
	// after the simulator's own retries (a crash, a hang, a malformed
	// reply); the error names the batch and its component values.
	SimulateSamples(samples []Sample, bad []bool) error
	// MaxRedraws is how often a sample whose observation was unusable is
	// redrawn from the prior before TrySimulateBatch gives up.
	MaxRedraws() int
}

// TrySimulateBatch is SimulateBatch for families that may fail. For a
// BatchSimulator, a sample whose observation is unusable is dropped and
// replaced by a fresh draw (λ, M, θ, design) from the same per-sample random
// source, so the stream stays reproducible; it returns how many draws were
// dropped. Once a sample has been redrawn MaxRedraws times without success,
// or the simulator fails as a whole, it returns an error. For every other
// family it is SimulateBatch and never fails.
func TrySimulateBatch(f Family, opt SimOptions, start uint64, out []Sample) (dropped int, err error) {
	bs, ok := f.(BatchSimulator)
	if !ok {
		SimulateBatch(f, opt, start, out)
		return 0, nil
	}
	ds := opt.Designs
	if ds == nil {
		if ds, err = f.Designs(""); err != nil {
			return 0, fmt.Errorf("family: %s has no default design: %w", f.Name(), err)
		}
	}
	C, dmax, prior := len(f.Components()), f.Layout().DMax, f.MaskPrior()
	rngs := make([]*rand.Rand, len(out))
	for i := range out {
		out[i].Index = start + uint64(i)
		rngs[i] = SampleRNG(opt.Seed, out[i].Index)
		drawPrior(f, prior, ds, opt, C, dmax, rngs[i], &out[i])
	}
	bad := make([]bool, len(out))
	pending := make([]int, len(out)) // positions in out still to simulate
	for i := range pending {
		pending[i] = i
	}
	batch := out
	for round := 0; ; round++ {
		if round > 0 {
			batch = make([]Sample, len(pending))
			for j, i := range pending {
				batch[j] = out[i]
			}
		}
		if err := bs.SimulateSamples(batch, bad[:len(batch)]); err != nil {
			return dropped, err
		}
		var failed []int
		for j, i := range pending {
			out[i] = batch[j]
			if bad[j] {
				failed = append(failed, i)
			}
		}
		if len(failed) == 0 {
			return dropped, nil
		}
		dropped += len(failed)
		if round == bs.MaxRedraws() {
			s := &out[failed[0]]
			return dropped, fmt.Errorf("family: %s: sample %d (mask %s, %s) and %d other(s) of samples %d–%d still gave a NaN or infinite observation after %d redraw(s) from the prior",
				f.Name(), s.Index, MaskString(s.Mask), DescribeParams(f, s.Theta, s.Mask), len(failed)-1, start, start+uint64(len(out))-1, round)
		}
		for _, i := range failed {
			drawPrior(f, prior, ds, opt, C, dmax, rngs[i], &out[i])
		}
		pending = failed
	}
}

// drawPrior draws λ, the mask, θ and the design of s from r (the steps of
// simulateRange before the simulator) and then the simulator seed.
func drawPrior(f Family, prior MaskPrior, ds DesignSampler, opt SimOptions, C, dmax int, r *rand.Rand, s *Sample) {
	s.Lambda = opt.Lambda
	if math.IsNaN(s.Lambda) {
		s.Lambda = opt.LambdaDist.Sample(r)
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
	canonicalize(f, s)
	s.Design = ds.SampleDesign(r)
	s.X = resize(s.X, s.Design.N)
	s.SimSeed = r.Uint64()
}

// DescribeParams renders the natural parameters of the active components
// for error messages: "Const.c1=0.31 Sine.c1=-1.2 …".
func DescribeParams(f Family, theta []float64, mask []bool) string {
	p := f.Natural(theta, mask)
	var b strings.Builder
	comps := f.Components()
	for k, c := range comps {
		vals, ok := p.Components[k]
		if !ok {
			continue
		}
		for _, prm := range c.Params {
			if v, ok := vals[prm.Name]; ok {
				fmt.Fprintf(&b, "%s.%s=%.6g ", c.Name, prm.Name, v)
			}
		}
	}
	for _, prm := range f.Layout().Shared {
		if v, ok := p.Shared[prm.Name]; ok {
			fmt.Fprintf(&b, "%s=%.6g ", prm.Name, v)
		}
	}
	if b.Len() == 0 {
		return "no parameters"
	}
	return "parameters " + strings.TrimSpace(b.String())
}
