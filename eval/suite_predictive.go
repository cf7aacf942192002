package eval

import (
	"fmt"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
)

// PredictiveResult holds predictive RMSEs (paper App. A.1).
type PredictiveResult struct {
	Obs        int   `json:"observations"`
	Samples    int   `json:"samples"`
	Replicates int   `json:"replicates"`
	Local      Value `json:"rmse_local"`
	Global     Value `json:"rmse_global"`
	Floor      Value `json:"rmse_min"`
	RelLocal   Value `json:"rrmse_local"`
	RelGlobal  Value `json:"rrmse_global"`
}

func (r *run) predictive(ts []posterior.ThetaSet) (*PredictiveResult, error) {
	cfg := r.cfg
	n := cfg.PredObs
	res := &PredictiveResult{Obs: n, Samples: cfg.PredSamples, Replicates: cfg.Replicates}
	so := r.so
	so.Seed = r.seed(streamPred)
	js := make([]posterior.JointSet, n)
	err := byLambda(r.lams[:n], func(l float64, idx []int) error {
		for _, i := range idx {
			so.Offset = uint64(i)
			// Masks from q restricted to the prior's support: the
			// family cannot simulate the others.
			ms, err := r.p.SampleMasksSupported(r.obs[i:i+1], l, cfg.PredSamples, so.Options)
			if err != nil {
				return fmt.Errorf("eval: global predictive: %w", err)
			}
			th, err := r.p.SampleTheta(r.obs[i:i+1], ms, so)
			if err != nil {
				return fmt.Errorf("eval: global predictive: %w", err)
			}
			js[i] = posterior.JointSet{MaskSet: posterior.MaskSet{Masks: ms[0]}, Theta: th[0].Theta}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	local := make([]float64, n)
	global := make([]float64, n)
	floor := make([]float64, n)
	for i := 0; i < n; i++ {
		rng := family.SampleRNG(r.seed(streamPred), uint64(i))
		d, x := r.obs[i].Design, r.obs[i].X
		out := make([]float64, d.N)
		mse := func(theta []float64, m []bool) float64 {
			r.f.Simulate(rng, d, theta, m, out)
			s := 0.0
			for j := range out {
				s += (out[j] - x[j]) * (out[j] - x[j])
			}
			return s / float64(d.N)
		}
		for _, th := range ts[i].Theta {
			local[i] += mse(th, r.sims[i].Mask) / float64(len(ts[i].Theta))
		}
		for k, th := range js[i].Theta {
			global[i] += mse(th, js[i].Masks[k]) / float64(len(js[i].Theta))
		}
		for k := 0; k < cfg.Replicates; k++ {
			floor[i] += mse(r.sims[i].Theta, r.sims[i].Mask) / float64(cfg.Replicates)
		}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	val := func(f func(idx []int) float64) Value {
		return Value{f(all), Bootstrap(n, cfg.BootReps, r.seed(streamBoot), f)}
	}
	res.Local = val(func(idx []int) float64 { return RMSE(pick(local, idx)) })
	res.Global = val(func(idx []int) float64 { return RMSE(pick(global, idx)) })
	res.Floor = val(func(idx []int) float64 { return RMSE(pick(floor, idx)) })
	res.RelLocal = val(func(idx []int) float64 { return RMSE(pick(local, idx)) - RMSE(pick(floor, idx)) })
	res.RelGlobal = val(func(idx []int) float64 { return RMSE(pick(global, idx)) - RMSE(pick(floor, idx)) })
	return res, nil
}
