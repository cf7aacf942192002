package posterior

import (
	"cmp"
	"math"
	"slices"

	"github.com/prismsbi/prism/family"
)

// Sweep is the model posterior of one observation over a grid of λ (the
// paper's Fig. 2 right): at each λ the distinct models among draws from
// q(M | x, λ), ranked, and the distribution of the number of active base
// components over the draws; and, for a figure, a few models — the most
// probable at some λ — with their exact q(M | x, λ) at every λ.
type Sweep struct {
	Lambdas []float64
	// Ranked[l] are the distinct models drawn at Lambdas[l] (Discover).
	Ranked [][]Ranked
	// Number of active base components over the draws at each λ: mean,
	// and the 5 %, 50 % and 95 % quantiles (the smallest count whose
	// cumulative frequency reaches the level).
	ActiveMean, ActiveQ05, ActiveMedian, ActiveQ95 []float64
	// Shown are up to the requested number of models: of the three most
	// frequent draws at every λ, those with the highest q(M | x, λ) at
	// some λ, ordered by the λ at which each peaks (pickShown);
	// ShownProb[k][l] is q(Shown[k] | x, Lambdas[l]).
	Shown     [][]bool
	ShownProb [][]float64
}

// LambdaSweep computes the Sweep of every observation: draws masks per
// observation at every λ (Discover, one batch over the observations) and
// scores up to shown models exactly across the grid. It is deterministic
// given opt.Seed.
func (p *Posterior) LambdaSweep(obs []Observation, lambdas []float64, masks, shown int, opt Options) ([]Sweep, error) {
	out := make([]Sweep, len(obs))
	for i := range out {
		out[i].Lambdas = lambdas
	}
	for _, lam := range lambdas {
		disc, err := p.Discover(obs, lam, masks, 0, opt)
		if err != nil {
			return nil, err
		}
		for i := range obs {
			s := &out[i]
			s.Ranked = append(s.Ranked, disc[i])
			mean, q05, med, q95 := activeSummary(p.fam, disc[i])
			s.ActiveMean = append(s.ActiveMean, mean)
			s.ActiveQ05, s.ActiveMedian, s.ActiveQ95 = append(s.ActiveQ05, q05), append(s.ActiveMedian, med), append(s.ActiveQ95, q95)
		}
	}
	// Candidates: the three most frequent draws at every λ. All are scored
	// exactly at every λ and the figure keeps those of highest peak
	// probability, so a model that dominates only at one end of the grid is
	// not crowded out by the runners-up of the other end.
	cands := make([][][]bool, len(obs))
	prob := make([][][]float64, len(obs)) // [obs][candidate][λ]
	for i := range obs {
		cands[i] = sweepCandidates(out[i].Ranked)
		prob[i] = make([][]float64, len(cands[i]))
		for k := range prob[i] {
			prob[i][k] = make([]float64, len(lambdas))
		}
	}
	for l, lam := range lambdas {
		lq, err := p.LogProbMasks(obs, lam, cands, opt)
		if err != nil {
			return nil, err
		}
		for i := range obs {
			for k := range cands[i] {
				prob[i][k][l] = math.Exp(lq[i][k])
			}
		}
	}
	for i := range obs {
		for _, k := range pickShown(prob[i], shown) {
			out[i].Shown = append(out[i].Shown, cands[i][k])
			out[i].ShownProb = append(out[i].ShownProb, prob[i][k])
		}
	}
	return out, nil
}

// sweepCandidates returns the distinct models among the three most
// frequent draws at each λ of a sweep, in order of rank, then of λ.
func sweepCandidates(ranked [][]Ranked) [][]bool {
	var out [][]bool
	seen := map[string]bool{}
	for rank := range 3 {
		for _, rs := range ranked {
			if rank < len(rs) {
				if key := family.MaskString(rs[rank].Mask); !seen[key] {
					seen[key] = true
					out = append(out, rs[rank].Mask)
				}
			}
		}
	}
	return out
}

// pickShown returns the indices of the (at most) n ≥ 0 candidates whose
// probability prob[k][l] peaks highest over the λ grid, ordered by the
// grid index of the peak (then by peak height, then by index) so that a
// stacked figure of them reads from low to high λ.
func pickShown(prob [][]float64, n int) []int {
	type cand struct {
		k, at int
		peak  float64
	}
	cs := make([]cand, len(prob))
	for k, p := range prob {
		cs[k] = cand{k: k, at: -1, peak: math.Inf(-1)}
		for l, v := range p {
			if v > cs[k].peak {
				cs[k].at, cs[k].peak = l, v
			}
		}
	}
	byPeak := func(a, b cand) int {
		if c := cmp.Compare(b.peak, a.peak); c != 0 {
			return c
		}
		return cmp.Compare(a.k, b.k)
	}
	slices.SortStableFunc(cs, byPeak)
	cs = cs[:max(0, min(n, len(cs)))]
	slices.SortStableFunc(cs, func(a, b cand) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return byPeak(a, b)
	})
	idx := make([]int, len(cs))
	for i, c := range cs {
		idx[i] = c.k
	}
	return idx
}

// activeSummary returns the mean and the 5 %, 50 % and 95 % quantiles of
// the number of active base components over the draws of a ranking.
func activeSummary(f family.Family, rs []Ranked) (mean, q05, med, q95 float64) {
	counts := map[int]int{}
	n := 0
	for _, r := range rs {
		k := family.BaseCount(f, r.Mask)
		counts[k] += r.Count
		n += r.Count
		mean += float64(k * r.Count)
	}
	mean /= float64(n)
	var v []int
	for k := range counts {
		v = append(v, k)
	}
	slices.Sort(v)
	quantile := func(q float64) float64 {
		c := 0
		for _, k := range v {
			c += counts[k]
			if float64(c) >= q*float64(n) {
				return float64(k)
			}
		}
		return float64(v[len(v)-1])
	}
	return mean, quantile(0.05), quantile(0.5), quantile(0.95)
}
