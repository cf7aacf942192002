package eval

import (
	"fmt"
	"sort"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
)

// TVPoint is the model-posterior TV distance at one λ.
type TVPoint struct {
	Lambda float64 `json:"lambda"`
	// IS is the TV between q(M|x,λ) and the importance-sampling model
	// posterior, both restricted to each observation's model subset.
	IS Value `json:"tv_is_subset"`
	// Exact is the TV between q(M|x,λ) and the exact model posterior over
	// the whole model space (families with a closed-form evidence).
	Exact *Value `json:"tv_exact,omitempty"`
}

// EvidenceResult summarises importance sampling.
type EvidenceResult struct {
	Obs     int `json:"observations"`
	Samples int `json:"samples"`
	Models  int `json:"model_pairs"`
	// ESS is the mean normalised ESS under the true model, ESSMedian its
	// median, PerObs the values.
	ESS       Value     `json:"ess_mean"`
	ESSMedian Number    `json:"ess_median"`
	PerObs    []float64 `json:"-"`
	// LogEvidenceSE is the mean delta-method SE of log p̂(x|M).
	LogEvidenceSE Number `json:"log_evidence_se_mean"`
	// R2Sets is R² between the evidence estimates of two independent
	// sample sets; R2Proxy between the proxy log q(M|x,λ) − log p(M|λ)
	// and the IS evidence, both centred per observation over its subset;
	// R2Exact between IS and exact evidence (closed-form families).
	R2Sets  Value  `json:"r2_two_sets"`
	R2Proxy Value  `json:"r2_proxy"`
	R2Exact *Value `json:"r2_exact,omitempty"`
	// TV across λ.
	TV []TVPoint `json:"tv"`
}

func (r *run) evidence(ms []posterior.MaskSet) (*EvidenceResult, error) {
	cfg := r.cfg
	n := cfg.ISObs
	prior := r.f.MaskPrior()
	// Model subsets: the true mask first, then the most probable distinct
	// sampled masks.
	subsets := make([][][]bool, n)
	var pairObs []posterior.Observation
	var pairMask [][]bool
	var pairOf [][2]int
	for i := 0; i < n; i++ {
		sub := [][]bool{r.sims[i].Mask}
		seen := map[string]bool{family.MaskString(r.sims[i].Mask): true}
		order := make([]int, len(ms[i].Masks))
		for k := range order {
			order[k] = k
		}
		sort.SliceStable(order, func(a, b int) bool { return ms[i].LogQ[order[a]] > ms[i].LogQ[order[b]] })
		for _, k := range order {
			if len(sub) >= cfg.Subset {
				break
			}
			key := family.MaskString(ms[i].Masks[k])
			if !seen[key] {
				seen[key] = true
				sub = append(sub, ms[i].Masks[k])
			}
		}
		subsets[i] = sub
		for k, m := range sub {
			pairObs = append(pairObs, r.obs[i])
			pairMask = append(pairMask, m)
			pairOf = append(pairOf, [2]int{i, k})
		}
	}
	so := r.so
	so.Seed = r.seed(streamIS1)
	r.progress("importance sampling: %d (observation, model) pairs × %d samples × 2 sets", len(pairObs), cfg.ISSamples)
	is1, err := r.p.ImportanceSample(pairObs, pairMask, cfg.ISSamples, so)
	if err != nil {
		return nil, fmt.Errorf("eval: importance sampling: %w", err)
	}
	so.Seed = r.seed(streamIS2)
	is2, err := r.p.ImportanceSample(pairObs, pairMask, cfg.ISSamples, so)
	if err != nil {
		return nil, fmt.Errorf("eval: importance sampling: %w", err)
	}
	res := &EvidenceResult{Obs: n, Samples: cfg.ISSamples, Models: len(pairObs)}
	ev1 := make([][]float64, n)
	ev2 := make([][]float64, n)
	var seSum float64
	for p, io := range pairOf {
		i := io[0]
		ev1[i] = append(ev1[i], is1[p].LogEvidence)
		ev2[i] = append(ev2[i], is2[p].LogEvidence)
		seSum += is1[p].LogEvidenceSE
		if io[1] == 0 {
			res.PerObs = append(res.PerObs, is1[p].ESS)
		}
	}
	res.LogEvidenceSE = Number(seSum / float64(len(pairOf)))
	res.ESS.Value, res.ESS.SE = MeanSE(res.PerObs)
	res.ESSMedian = Number(Quantile(res.PerObs, 0.5))
	flat := func(v [][]float64, idx []int) []float64 {
		var out []float64
		for _, i := range idx {
			out = append(out, v[i]...)
		}
		return out
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	r2 := func(a, b [][]float64) Value {
		v := R2(flat(a, all), flat(b, all))
		se := Bootstrap(n, cfg.BootReps, r.seed(streamBoot), func(idx []int) float64 { return R2(flat(a, idx), flat(b, idx)) })
		return Value{v, se}
	}
	res.R2Sets = r2(ev1, ev2)

	// Evidence proxy log q(M|x,λ) − log p(M|λ), centred per observation.
	lqs, err := r.logProbMasks(r.obs[:n], r.lams[:n], subsets)
	if err != nil {
		return nil, err
	}
	proxy := make([][]float64, n)
	evc := make([][]float64, n)
	for i := 0; i < n; i++ {
		for k, m := range subsets[i] {
			proxy[i] = append(proxy[i], lqs[i][k]-prior.LogProb(m, r.lams[i]))
		}
		proxy[i] = centre(proxy[i])
		evc[i] = centre(ev1[i])
	}
	res.R2Proxy = r2(proxy, evc)

	if ex, ok := r.f.(family.ExactPosterior); ok {
		exact := make([][]float64, n)
		for i := 0; i < n; i++ {
			for _, m := range subsets[i] {
				exact[i] = append(exact[i], ex.LogEvidence(r.obs[i].X, m))
			}
		}
		v := r2(ev1, exact)
		res.R2Exact = &v
	}

	// TV across λ.
	var space [][]bool
	if _, ok := r.f.(family.ExactPosterior); ok {
		space = modelSpace(r.f, 4096)
	}
	for _, l := range cfg.TVLambdas {
		lams := make([]float64, n)
		for i := range lams {
			lams[i] = l
		}
		lq, err := r.logProbMasks(r.obs[:n], lams, subsets)
		if err != nil {
			return nil, err
		}
		tv := make([]float64, n)
		for i := 0; i < n; i++ {
			lp := make([]float64, len(subsets[i]))
			for k, m := range subsets[i] {
				lp[k] = ev1[i][k] + prior.LogProb(m, l)
			}
			tv[i] = TV(Normalize(lq[i]), Normalize(lp))
		}
		pt := TVPoint{Lambda: l}
		pt.IS.Value, pt.IS.SE = MeanSE(tv)
		if space != nil {
			ex := r.f.(family.ExactPosterior)
			lqAll, err := r.p.LogProbMasks(r.obs[:n], l, [][][]bool{space}, posterior.Options{})
			if err != nil {
				return nil, fmt.Errorf("eval: scoring masks: %w", err)
			}
			tve := make([]float64, n)
			le := make([]float64, len(space))
			for i := 0; i < n; i++ {
				for k, m := range space {
					le[k] = ex.LogEvidence(r.obs[i].X, m) + prior.LogProb(m, l)
				}
				tve[i] = TV(Normalize(lqAll[i]), Normalize(le))
			}
			var v Value
			v.Value, v.SE = MeanSE(tve)
			pt.Exact = &v
		}
		res.TV = append(res.TV, pt)
	}
	return res, nil
}

func centre(x []float64) []float64 {
	m := mean(x)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v - m
	}
	return out
}
