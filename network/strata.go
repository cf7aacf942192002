package network

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/family"
)

// strataGrid is the number of cells of the grid on which p(λ | M) is
// tabulated for the λ strata (a piecewise-constant density).
const strataGrid = 256

// fillLambdaStrata writes the J-stratum mask-loss rows of samples into b.
// With λ ~ ρ (U(0, 1) unless SetTrainingLambda said otherwise) the
// posterior of λ given a simulated mask is p(λ | M) ∝ ρ(λ) p(M | λ). It
// is tabulated as a piecewise-constant density on strataGrid cells (cell
// midpoints, so priors that vanish at λ = 0 or 1 stay finite), with CDF
// F. A sample's own λ has u₀ = F(λ) ~ U(0, 1) given M; the strata are
// λ_j = F⁻¹((j + u)/J), j = 0…J−1, with u = frac(J·u₀).
// Given M, u ~ U(0, 1), so each λ_j is an exact draw from (the tabulated)
// p(λ | M) and the mean over the strata is an unbiased, stratified
// estimate of E[loss | M, x]: the minimiser of the loss is unchanged, its
// noise in λ is reduced. The sample's own λ is one of the strata (up to
// the tabulation). Deterministic given the samples.
func (n *Net) fillLambdaStrata(samples []family.Sample, J int, b *Batch) error {
	bs, c := len(samples), n.c
	b.SLambda = resize(b.SLambda, bs*J)
	b.SBitsIn = resize(b.SBitsIn, bs*J*c)
	b.STargets = resize(b.STargets, bs*J*c)
	b.SWeight = resize(b.SWeight, bs*J*c)
	prior := n.fam.MaskPrior()
	cdf := make([]float64, strataGrid+1)
	for i := range samples {
		s := &samples[i]
		if err := lambdaCDF(prior, n.trainLambda, s.Mask, cdf); err != nil {
			return fmt.Errorf("network: sample %d: %w", s.Index, err)
		}
		u0 := evalCDF(cdf, s.Lambda)
		u := math.Mod(float64(J)*u0, 1)
		w := float32(math.Exp(s.LogWeight)) / float32(J)
		for j := range J {
			row := i*J + j
			b.SLambda[row] = float32(invertCDF(cdf, (float64(j)+u)/float64(J)))
			maskBitsIn(s.Mask, b.SBitsIn[row*c:(row+1)*c])
			for k, on := range s.Mask {
				b.STargets[row*c+k] = boolf(on)
				b.SWeight[row*c+k] = w
			}
		}
	}
	return nil
}

// lambdaCDF tabulates the CDF of p(λ | M) ∝ ρ(λ) p(M | λ) on [0, 1]:
// cdf[g] = F(g/G), with the density constant on each cell (its value at
// the cell's midpoint).
func lambdaCDF(prior family.MaskPrior, rho family.LambdaDist, mask []bool, cdf []float64) error {
	G := len(cdf) - 1
	lp := make([]float64, G)
	mx := math.Inf(-1)
	for g := range lp {
		l := (float64(g) + 0.5) / float64(G)
		lp[g] = prior.LogProb(mask, l) + math.Log(rho.Density(l))
		mx = max(mx, lp[g])
	}
	if math.IsInf(mx, -1) || math.IsNaN(mx) {
		return fmt.Errorf("mask %s has no prior probability at any λ", family.MaskString(mask))
	}
	cdf[0] = 0
	for g, l := range lp {
		cdf[g+1] = cdf[g] + math.Exp(l-mx)
	}
	z := cdf[G]
	for g := range cdf {
		cdf[g] /= z
	}
	return nil
}

// evalCDF returns F(λ) of the tabulated CDF (linear within a cell).
func evalCDF(cdf []float64, lambda float64) float64 {
	G := len(cdf) - 1
	x := min(max(lambda, 0), 1) * float64(G)
	g := min(int(x), G-1)
	return cdf[g] + (x-float64(g))*(cdf[g+1]-cdf[g])
}

// invertCDF returns λ with F(λ) = p for the tabulated CDF (the inverse of
// evalCDF; cells of zero mass are skipped).
func invertCDF(cdf []float64, p float64) float64 {
	G := len(cdf) - 1
	lo, hi := 0, G // cdf[lo] ≤ p ≤ cdf[hi]
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if cdf[mid] <= p {
			lo = mid
		} else {
			hi = mid
		}
	}
	d := cdf[lo+1] - cdf[lo]
	f := 0.5
	if d > 0 {
		f = min(max((p-cdf[lo])/d, 0), 1)
	}
	return (float64(lo) + f) / float64(G)
}
