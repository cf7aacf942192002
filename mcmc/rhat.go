package mcmc

import (
	"math"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/prismsbi/prism/internal/quantile"
)

// SplitRhat returns the split potential scale reduction factor R̂ of
// Gelman et al., Bayesian Data Analysis 3rd ed. §11.4: every chain is cut
// into a first and a second half (the middle draw of an odd-length chain is
// dropped), and with the 2m half-chains of length n,
//
//	W = mean of the within-half-chain variances (denominator n−1),
//	B = n · variance of the half-chain means (denominator 2m−1),
//	R̂ = √(((n−1)/n·W + B/n) / W).
//
// R̂ near 1 says the half-chains agree; values above ~1.01–1.05 indicate
// non-convergence or non-stationarity. Chains must have equal lengths ≥ 4.
// It returns NaN when that fails or W = 0.
func SplitRhat(chains [][]float64) float64 {
	if len(chains) == 0 {
		return math.NaN()
	}
	n := len(chains[0]) / 2
	if n < 2 {
		return math.NaN()
	}
	halves := make([][]float64, 0, 2*len(chains))
	for _, c := range chains {
		if len(c) != len(chains[0]) {
			return math.NaN()
		}
		halves = append(halves, c[:n], c[len(c)-n:])
	}
	m := float64(len(halves))
	means := make([]float64, len(halves))
	var w, grand float64
	for k, h := range halves {
		mu := mean(h)
		var ss float64
		for _, x := range h {
			ss += (x - mu) * (x - mu)
		}
		w += ss / float64(n-1)
		means[k] = mu
		grand += mu
	}
	w /= m
	grand /= m
	var b float64
	for _, mu := range means {
		b += (mu - grand) * (mu - grand)
	}
	b *= float64(n) / (m - 1)
	if !(w > 0) {
		return math.NaN()
	}
	nf := float64(n)
	return math.Sqrt(((nf-1)/nf*w + b/nf) / w)
}

// RankRhat returns the rank-normalised split R̂ of Vehtari et al. (2021,
// Bayesian Analysis 16:667): the maximum of the bulk R̂ (SplitRhat of the
// rank-normalised draws z = Φ⁻¹((r − 3/8)/(S + 1/4)), r the pooled rank
// with ties averaged, S the total number of draws) and the tail R̂ (the same
// for the folded draws |x − median|). It is invariant to monotone
// transformations and, through the folded draws, sensitive to chains that
// differ in scale only.
func RankRhat(chains [][]float64) float64 {
	bulk := SplitRhat(rankNormalise(chains))
	folded := make([][]float64, len(chains))
	var all []float64
	for _, c := range chains {
		all = append(all, c...)
	}
	med := median(all)
	for k, c := range chains {
		folded[k] = make([]float64, len(c))
		for i, x := range c {
			folded[k][i] = math.Abs(x - med)
		}
	}
	tail := SplitRhat(rankNormalise(folded))
	if math.IsNaN(bulk) || math.IsNaN(tail) {
		return math.NaN()
	}
	return math.Max(bulk, tail)
}

// rankNormalise replaces every draw by the normal score of its pooled rank.
func rankNormalise(chains [][]float64) [][]float64 {
	type draw struct {
		x    float64
		k, i int
	}
	var all []draw
	for k, c := range chains {
		for i, x := range c {
			all = append(all, draw{x, k, i})
		}
	}
	sort.Slice(all, func(a, b int) bool { return all[a].x < all[b].x })
	out := make([][]float64, len(chains))
	for k, c := range chains {
		out[k] = make([]float64, len(c))
	}
	s := float64(len(all))
	for lo := 0; lo < len(all); {
		hi := lo
		for hi+1 < len(all) && all[hi+1].x == all[lo].x {
			hi++
		}
		r := float64(lo+hi)/2 + 1 // average 1-based rank of the tie group
		z := distuv.UnitNormal.Quantile((r - 0.375) / (s + 0.25))
		for t := lo; t <= hi; t++ {
			out[all[t].k][all[t].i] = z
		}
		lo = hi + 1
	}
	return out
}

// median is the sample median (internal/quantile).
func median(v []float64) float64 { return quantile.Median(v) }
