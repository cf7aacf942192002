package family

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Mask priors p(M | λ). Masks list the base components first and the noise
// components after them; every prior here puts exactly one noise component
// on, chosen uniformly.

// lambdaClip keeps λ away from 0 and 1 in the Bernoulli priors so that every
// mask the prior can produce has finite log-probability (as the reference
// implementation does).
const lambdaClip = 1e-6

func clipLambda(l float64) float64 {
	return math.Min(math.Max(l, lambdaClip), 1-lambdaClip)
}

// sampleNoise switches on exactly one of the n noise components that follow
// the base components in mask.
func sampleNoise(r *rand.Rand, mask []bool, base, n int) {
	j := 0
	if n > 1 {
		j = r.IntN(n)
	}
	for k := 0; k < n; k++ {
		mask[base+k] = k == j
	}
}

// logNoise returns log(1/n) when exactly one of the n noise components of
// mask is on, −Inf otherwise.
func logNoise(mask []bool, base, n int) float64 {
	on := 0
	for k := 0; k < n; k++ {
		if mask[base+k] {
			on++
		}
	}
	if on != 1 {
		return math.Inf(-1)
	}
	return -math.Log(float64(n))
}

// BernoulliPrior switches each of the NumBase base components on
// independently with probability λ and exactly one of the NumNoise noise
// components on uniformly (paper §4.1). λ is clipped to [1e−6, 1−1e−6].
//
// With MinActive = m > 0, m distinct base components chosen uniformly are
// then forced on, so every mask has at least m active base components. m = 1
// is the B3S prior of the reference code
// (BetaBernoulliMaskPrior with min_active_models = 1). Its probability is
//
//	p(M | λ) = C(n, m)/C(K, m) · λ^{n−m} (1−λ)^{K−n} · 1/NumNoise
//
// for n ≥ m active base components out of K = NumBase, which for m = 1
// equals the reference's log-sum-exp over the forced index.
type BernoulliPrior struct {
	NumBase, NumNoise int
	MinActive         int
}

// Sample draws a mask: the NumBase Bernoulli(λ) indicators in component
// order, then the forced components, then the noise component.
func (p BernoulliPrior) Sample(r *rand.Rand, lambda float64, mask []bool) {
	lambda = clipLambda(lambda)
	K := p.NumBase
	for k := 0; k < K; k++ {
		mask[k] = r.Float64() < lambda
	}
	switch m := min(p.MinActive, K); {
	case m == 1:
		mask[r.IntN(K)] = true
	case m > 1:
		// Selection sampling (Knuth's Algorithm S): a uniform m-subset in one
		// pass without scratch space.
		need := m
		for k := 0; k < K && need > 0; k++ {
			if r.IntN(K-k) < need {
				mask[k] = true
				need--
			}
		}
	}
	sampleNoise(r, mask, K, p.NumNoise)
}

// LogProb returns log p(mask | λ).
func (p BernoulliPrior) LogProb(mask []bool, lambda float64) float64 {
	lambda = clipLambda(lambda)
	K := p.NumBase
	n := ActiveCount(mask[:K])
	m := min(p.MinActive, K)
	if n < m {
		return math.Inf(-1)
	}
	lp := float64(n-m)*math.Log(lambda) + float64(K-n)*math.Log1p(-lambda)
	if m > 0 {
		lp += logBinom(n, m) - logBinom(K, m)
	}
	return lp + logNoise(mask, K, p.NumNoise)
}

// logBinom is log C(n, k).
func logBinom(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// DimPenalisedPrior is the dimension-penalised prior of the paper
// (App. C, BSZT "Model Prior"): base component k is on independently with
// probability p_k = σ(logit(P0) − (1−λ)·LambdaMax·Dims[k]), and exactly one
// of the NumNoise noise components is on, chosen uniformly. Small λ thus
// favours components with few parameters; at λ = 1 every component is on
// with probability P0.
//
// The zero values of P0 and LambdaMax stand for the paper's settings
// P0 = 0.5 and LambdaMax = 4. (The reference code's TotalParamPenalizedPrior,
// a sequential quadratic penalty, is deliberately not used; see
// docs/families.md.)
type DimPenalisedPrior struct {
	Dims      []int // latent dimension of each base component
	NumNoise  int
	P0        float64
	LambdaMax float64
}

// Paper settings of the dimension-penalised prior.
const (
	DefaultP0        = 0.5
	DefaultLambdaMax = 4.0
)

// logit returns logit p_k for base component k.
func (p DimPenalisedPrior) logit(k int, lambda float64) float64 {
	p0, lmax := p.P0, p.LambdaMax
	if p0 == 0 {
		p0 = DefaultP0
	}
	if lmax == 0 {
		lmax = DefaultLambdaMax
	}
	return math.Log(p0/(1-p0)) - (1-lambda)*lmax*float64(p.Dims[k])
}

// Prob returns p_k(λ), the probability that base component k is on.
func (p DimPenalisedPrior) Prob(k int, lambda float64) float64 {
	return 1 / (1 + math.Exp(-p.logit(k, lambda)))
}

// Sample draws the base indicators in component order, then the noise
// component.
func (p DimPenalisedPrior) Sample(r *rand.Rand, lambda float64, mask []bool) {
	K := len(p.Dims)
	for k := 0; k < K; k++ {
		mask[k] = r.Float64() < p.Prob(k, lambda)
	}
	sampleNoise(r, mask, K, p.NumNoise)
}

// LogProb returns log p(mask | λ).
func (p DimPenalisedPrior) LogProb(mask []bool, lambda float64) float64 {
	K := len(p.Dims)
	lp := 0.0
	for k := 0; k < K; k++ {
		l := p.logit(k, lambda)
		// log σ(l) = −softplus(−l), log(1−σ(l)) = −softplus(l).
		if mask[k] {
			lp -= softplus(-l)
		} else {
			lp -= softplus(l)
		}
	}
	return lp + logNoise(mask, K, p.NumNoise)
}

// softplus is log(1+eˣ) without overflow.
func softplus(x float64) float64 {
	if x > 0 {
		return x + math.Log1p(math.Exp(-x))
	}
	return math.Log1p(math.Exp(x))
}

// MaskPriorTable evaluates log p(M | λ) of a fixed list of masks at any λ.
// The categorical model decoder needs its whole support's prior at every
// training sample's λ, so this is on the training path.
type MaskPriorTable interface {
	// LogProbs writes log p(masks[j] | λ) into dst[j] (len(dst) =
	// len(masks)).
	LogProbs(lambda float64, dst []float64)
}

// MaskPriorTabler is implemented by mask priors with a table faster than
// calling LogProb mask by mask.
type MaskPriorTabler interface {
	Table(masks [][]bool) MaskPriorTable
}

// NewMaskPriorTable returns p's own table for masks if it has one, else a
// table that calls p.LogProb for each mask. The masks are copied.
func NewMaskPriorTable(p MaskPrior, masks [][]bool) MaskPriorTable {
	own := make([][]bool, len(masks))
	for j, m := range masks {
		own[j] = append([]bool(nil), m...)
	}
	if t, ok := p.(MaskPriorTabler); ok {
		return t.Table(own)
	}
	return genericTable{p, own}
}

type genericTable struct {
	p     MaskPrior
	masks [][]bool
}

func (t genericTable) LogProbs(lambda float64, dst []float64) {
	for j, m := range t.masks {
		dst[j] = t.p.LogProb(m, lambda)
	}
}

// bernoulliTable holds, per mask, the exponents of λ and 1−λ and the
// λ-independent rest of BernoulliPrior.LogProb:
// log p = a·log λ + b·log(1−λ) + c.
type bernoulliTable struct {
	a, b, c []float64
}

// Table returns p's table for masks: two logarithms per λ instead of two
// per mask.
func (p BernoulliPrior) Table(masks [][]bool) MaskPriorTable {
	t := bernoulliTable{make([]float64, len(masks)), make([]float64, len(masks)), make([]float64, len(masks))}
	K, m := p.NumBase, min(p.MinActive, p.NumBase)
	for j, mask := range masks {
		n := ActiveCount(mask[:K])
		t.a[j], t.b[j] = float64(n-m), float64(K-n)
		// LogProb at λ = ½ minus its λ-dependent part (−Inf stays −Inf).
		t.c[j] = p.LogProb(mask, 0.5) + (t.a[j]+t.b[j])*math.Ln2
	}
	return t
}

func (t bernoulliTable) LogProbs(lambda float64, dst []float64) {
	lambda = clipLambda(lambda)
	ll, l1 := math.Log(lambda), math.Log1p(-lambda)
	for j := range dst {
		dst[j] = t.a[j]*ll + t.b[j]*l1 + t.c[j]
	}
}

// CheckMask returns an error naming the mask and the reason when mask is
// not a model of f: the wrong length, or outside the support of f's mask
// prior (log p(mask | λ) = −Inf; the priors clip λ, so the support does
// not depend on it), such as a mask with no noise component or, for
// priors with a minimum number of active components, too few.
func CheckMask(f Family, mask []bool) error {
	comps := f.Components()
	if len(mask) != len(comps) {
		return fmt.Errorf("mask %s has %d entries, the %s family has %d components", MaskString(mask), len(mask), f.Name(), len(comps))
	}
	if lp := f.MaskPrior().LogProb(mask, 0.5); !math.IsInf(lp, -1) && !math.IsNaN(lp) {
		return nil
	}
	noise, base := 0, 0
	for k, c := range comps {
		if !mask[k] {
			continue
		}
		if c.Kind == Noise {
			noise++
		} else {
			base++
		}
	}
	var why string
	switch {
	case noise != 1:
		why = fmt.Sprintf("%d noise components are on, every model has exactly one", noise)
	default:
		why = fmt.Sprintf("%d base components are on, fewer than the prior's minimum", base)
	}
	return fmt.Errorf("mask %s is outside the support of the %s family's model prior: %s", MaskString(mask), f.Name(), why)
}
