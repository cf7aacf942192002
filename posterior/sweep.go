package posterior

import (
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
	// Shown are up to the requested number of models: the most probable
	// at each λ, then the runners-up; ShownProb[k][l] is q(Shown[k] | x,
	// Lambdas[l]).
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
	lists := make([][][]bool, len(obs))
	for i := range obs {
		s := &out[i]
		seen := map[string]bool{}
		for rank := 0; rank < 3 && len(s.Shown) < shown; rank++ {
			for l := range lambdas {
				if rs := s.Ranked[l]; rank < len(rs) && len(s.Shown) < shown {
					if key := family.MaskString(rs[rank].Mask); !seen[key] {
						seen[key] = true
						s.Shown = append(s.Shown, rs[rank].Mask)
					}
				}
			}
		}
		lists[i] = s.Shown
		s.ShownProb = make([][]float64, len(s.Shown))
		for k := range s.ShownProb {
			s.ShownProb[k] = make([]float64, len(lambdas))
		}
	}
	for l, lam := range lambdas {
		lq, err := p.LogProbMasks(obs, lam, lists, opt)
		if err != nil {
			return nil, err
		}
		for i := range obs {
			for k := range out[i].Shown {
				out[i].ShownProb[k][l] = math.Exp(lq[i][k])
			}
		}
	}
	return out, nil
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
