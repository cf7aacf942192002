package eval

import (
	"math"
	"testing"

	"github.com/prismsbi/prism/family/lingauss"
	"github.com/prismsbi/prism/posterior"
)

// TestExactTVAgainstLingauss checks the suite's generic exact comparison
// (model space enumerated from the family, exact posterior from
// LogEvidence + mask prior) against lingauss.ModelPosterior, on the
// committed trained network: the enumerated q sums to 1 (the network's
// model posterior is normalised over the 64 masks; float32 rounding
// of the 7 conditional log-probabilities: ≤ 5·10⁻⁴) and the TV per observation agrees to 10⁻⁹.
func TestExactTVAgainstLingauss(t *testing.T) {
	p, err := posterior.Load("../posterior/testdata/lingauss-k6-ema.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{N: 6, Seed: 3, Lambda: math.NaN()}
	if err := cfg.defaults(p.Family()); err != nil {
		t.Fatal(err)
	}
	r := &run{p: p, f: p.Family(), cfg: cfg}
	r.simulate()
	ex, err := r.exactTV()
	if err != nil {
		t.Fatal(err)
	}
	if ex == nil || ex.Models != lingauss.NumMasks {
		t.Fatalf("exact result %+v", ex)
	}
	f := lingauss.New()
	all := make([][]bool, lingauss.NumMasks)
	for k := range all {
		all[k] = lingauss.MaskFromIndex(k)
	}
	sum := 0.0
	for i, o := range r.obs {
		lq, err := p.LogProbMasks(r.obs[i:i+1], r.lams[i], [][][]bool{all}, posterior.Options{})
		if err != nil {
			t.Fatal(err)
		}
		q := make([]float64, len(all))
		z := 0.0
		for k, l := range lq[0] {
			q[k] = math.Exp(l)
			z += q[k]
		}
		if math.Abs(z-1) > 5e-4 {
			t.Errorf("observation %d: q sums to %v over all masks", i, z)
		}
		for k := range q {
			q[k] /= z
		}
		sum += TV(q, f.ModelPosterior(o.X, r.lams[i]))
	}
	if want := sum / float64(len(r.obs)); math.Abs(ex.TV.Value-want) > 1e-9 {
		t.Errorf("suite mean TV %v, direct %v", ex.TV.Value, want)
	}
}
