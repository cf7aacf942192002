package train

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/family/lingauss"
	"github.com/prismsbi/prism/network"
)

// LingaussEvalSeed is the simulation seed of the held-out lingauss-k6
// observations used by LingaussMaskTV in tests and docs. Training streams
// are derived from Config.Seed through deriveSeed, so they never use this
// stream directly.
const LingaussEvalSeed = 0x6c696e6761757373

// LingaussAccuracy is how close a network's q(M | x, λ) is to the exact
// lingauss-k6 model posterior p(M | x, λ), averaged over held-out
// observations.
type LingaussAccuracy struct {
	// MeanTV and WorstTV are the mean and largest total-variation
	// distance ½ Σ_M |q(M) − p(M)|.
	MeanTV, WorstTV float64
	// MeanKL is the mean KL(p ‖ q) = Σ_M p(M) log(p(M)/q(M)) in nats: the
	// expected excess of the model decoder's training loss over the exact
	// posterior's, measured without the sampling noise of a validation
	// loss.
	MeanKL float64
}

// LingaussMaskAccuracy measures how well a network trained on lingauss-k6
// has learnt the model posterior: for n observations (λ ~ U(0,1), masks
// from the prior, samples 0…n−1 of the simulation stream seed) it computes
// the network's q(M | x, λ) by teacher forcing for all 64 masks of the six
// base components (noise component on) and compares it with the exact
// p(M | x, λ) (lingauss.ModelPosterior). Mass that q puts on masks with the
// noise component off, which p excludes, counts towards the distance:
// TV = ½(Σ_M |q(M) − p(M)| + q(noise off)).
func LingaussMaskAccuracy(net *network.Net, n int, seed uint64) (LingaussAccuracy, error) {
	var acc LingaussAccuracy
	lf, ok := net.Family().(*lingauss.Family)
	if !ok {
		if err := sameModel(net.Family(), lingauss.New()); err != nil {
			return acc, fmt.Errorf("train: LingaussMaskAccuracy needs a lingauss-k6 network (or one of a family spec re-creating it): %w", err)
		}
		lf = lingauss.New()
	}
	samples := make([]family.Sample, n)
	family.SimulateBatch(lf, family.SimOptions{Seed: seed, Lambda: math.NaN()}, 0, samples)
	masks := make([][]bool, lingauss.NumMasks)
	for i := range masks {
		masks[i] = lingauss.MaskFromIndex(i)
	}
	g := engine.NewInferenceGraph()
	var logq []float64
	for i := range samples {
		s := &samples[i]
		g.Reset()
		enc, err := net.Encode(g, []network.Observation{{Design: s.Design, X: s.X}})
		if err != nil {
			return acc, fmt.Errorf("train: LingaussMaskAccuracy: %w", err)
		}
		logq, err = net.MaskLogProbs(g, enc, s.Lambda, masks, logq)
		if err != nil {
			return acc, fmt.Errorf("train: LingaussMaskAccuracy: %w", err)
		}
		p := lf.ModelPosterior(s.X, s.Lambda)
		tv, qsum, kl := 0.0, 0.0, 0.0
		for m, lq := range logq {
			q := math.Exp(lq)
			qsum += q
			tv += math.Abs(q - p[m])
			if p[m] > 0 {
				kl += p[m] * (math.Log(p[m]) - lq)
			}
		}
		tv = 0.5 * (tv + math.Max(0, 1-qsum))
		acc.MeanTV += tv / float64(n)
		acc.MeanKL += kl / float64(n)
		acc.WorstTV = math.Max(acc.WorstTV, tv)
	}
	return acc, nil
}

// LingaussPriorTV is LingaussMaskAccuracy's mean TV for q = the mask prior p(M | λ): the
// distance of an uninformed guess, for scale.
func LingaussPriorTV(n int, seed uint64) float64 {
	lf := lingauss.New()
	samples := make([]family.Sample, n)
	family.SimulateBatch(lf, family.SimOptions{Seed: seed, Lambda: math.NaN()}, 0, samples)
	prior := lf.MaskPrior()
	mean := 0.0
	for i := range samples {
		s := &samples[i]
		p := lf.ModelPosterior(s.X, s.Lambda)
		tv := 0.0
		for m := range p {
			tv += math.Abs(math.Exp(prior.LogProb(lingauss.MaskFromIndex(m), s.Lambda)) - p[m])
		}
		mean += 0.5 * tv / float64(n)
	}
	return mean
}

// sameModel reports a difference between the structure of f and the
// lingauss-k6 family g: component names, kinds and latent sizes, the mask
// prior's probabilities at λ = 0.3 and the default design's grid. A family
// spec re-creating lingauss-k6 (examples/lingauss-k6/family.yaml) passes;
// that its simulations equal lingauss-k6's is tested in family/spec.
func sameModel(f, g family.Family) error {
	fc, gc := f.Components(), g.Components()
	if len(fc) != len(gc) || f.Layout().DMax != g.Layout().DMax {
		return fmt.Errorf("%s has %d components and d_max %d, %s %d and %d", f.Name(), len(fc), f.Layout().DMax, g.Name(), len(gc), g.Layout().DMax)
	}
	mask := make([]bool, len(fc))
	for k := range fc {
		if fc[k].Name != gc[k].Name || fc[k].Kind != gc[k].Kind || fc[k].Latent != gc[k].Latent {
			return fmt.Errorf("%s component %d is %s, %s's %s", f.Name(), k, fc[k].Name, g.Name(), gc[k].Name)
		}
		mask[k] = k%2 == 0 || gc[k].Kind == family.Noise
	}
	if a, b := f.MaskPrior().LogProb(mask, 0.3), g.MaskPrior().LogProb(mask, 0.3); math.Abs(a-b) > 1e-12 {
		return fmt.Errorf("%s's mask prior differs from %s's", f.Name(), g.Name())
	}
	fd, err1 := f.Designs("")
	gd, err2 := g.Designs("")
	if err1 != nil || err2 != nil {
		return fmt.Errorf("no default design: %v %v", err1, err2)
	}
	a, b := fd.SampleDesign(nil), gd.SampleDesign(nil)
	if a.N != b.N || a.CovDim != b.CovDim {
		return fmt.Errorf("%s's grid differs from %s's", f.Name(), g.Name())
	}
	for j := range a.Cov {
		if a.Cov[j] != b.Cov[j] {
			return fmt.Errorf("%s's grid differs from %s's at point %d", f.Name(), g.Name(), j)
		}
	}
	return nil
}
