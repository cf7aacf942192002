package correct

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/family/lingauss"
	"github.com/prismsbi/prism/posterior"
)

// testNet is the committed lingauss-k6 network of the posterior tests
// (docs/posterior.md: 8390 training steps, visibly imperfect).
const testNet = "../posterior/testdata/lingauss-k6-ema.safetensors"

func loadTestNet(t testing.TB) (*posterior.Posterior, *lingauss.Family) {
	t.Helper()
	p, err := posterior.Load(testNet)
	if err != nil {
		t.Fatal(err)
	}
	return p, p.Family().(*lingauss.Family)
}

// heldOut simulates n lingauss observations at λ = 0.5 from a stream
// never used for training.
func heldOut(n int, seed uint64) ([]posterior.Observation, [][]bool) {
	lf := lingauss.New()
	s := make([]family.Sample, n)
	family.SimulateBatch(lf, family.SimOptions{Seed: seed, Lambda: 0.5}, 0, s)
	obs := make([]posterior.Observation, n)
	masks := make([][]bool, n)
	for i := range s {
		obs[i] = posterior.Observation{Design: s[i].Design, X: s[i].X}
		masks[i] = s[i].Mask
	}
	return obs, masks
}

func allMasks() [][]bool {
	m := make([][]bool, lingauss.NumMasks)
	for i := range m {
		m[i] = lingauss.MaskFromIndex(i)
	}
	return m
}

func TestExploreLingauss(t *testing.T) {
	p, lf := loadTestNet(t)
	obs, _ := heldOut(6, 0x636f7272656374)
	s := DefaultSettings(SMC)
	s.Sample.Seed = 1
	s.Sample.Steps = 16
	t0 := time.Now()
	res, err := Evidence(p, obs, [][][]bool{allMasks()}, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("time %v", time.Since(t0))
	for i := range obs {
		for _, lam := range []float64{0.1, 0.5, 0.9} {
			pe := lf.ModelPosterior(obs[i].X, lam)
			mp := Models(lf, res[i], lam)
			tv := 0.0
			for m := range pe {
				tv += 0.5 * math.Abs(pe[m]-mp.Prob[m])
			}
			t.Logf("obs %d λ %.1f TV %.4f failed %v %s", i, lam, tv, mp.Failed, mp.Reason)
		}
		maxd, maxse, steps, ess, acc := 0.0, 0.0, 0.0, 1.0, 0.0
		for m, r := range res[i] {
			ex := lf.LogEvidence(obs[i].X, lingauss.MaskFromIndex(m))
			maxd = math.Max(maxd, math.Abs(r.LogEvidence-ex))
			maxse = math.Max(maxse, r.LogEvidenceSE)
			steps += r.Steps / 64
			acc += r.Accept / 64
			ess = math.Min(ess, r.ESS)
		}
		t.Logf("obs %d: max |Δ log Z| %.4f, max SE %.4f, mean steps %.1f, min ESS %.3f, acc %.2f", i, maxd, maxse, steps, ess, acc)
	}
	_ = rand.New
}
