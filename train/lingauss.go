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

// LingaussMaskTV measures how well a network trained on lingauss-k6 has
// learnt the model posterior: for n observations (λ ~ U(0,1), masks from
// the prior, samples 0…n−1 of the simulation stream seed) it computes the
// network's q(M | x, λ) by teacher forcing for all 64 masks of the six
// base components (noise component on) and returns the mean and the
// largest total-variation distance to the exact p(M | x, λ)
// (lingauss.ModelPosterior). Mass that q puts on masks with the noise
// component off, which p excludes, counts towards the distance:
// TV = ½(Σ_M |q(M) − p(M)| + q(noise off)).
func LingaussMaskTV(net *network.Net, n int, seed uint64) (mean, worst float64, err error) {
	lf, ok := net.Family().(*lingauss.Family)
	if !ok {
		return 0, 0, fmt.Errorf("train: LingaussMaskTV needs a lingauss-k6 network, got %s", net.Family().Name())
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
			return 0, 0, fmt.Errorf("train: LingaussMaskTV: %w", err)
		}
		logits, err := net.MaskLogits(g, enc, s.Lambda, masks)
		if err != nil {
			return 0, 0, fmt.Errorf("train: LingaussMaskTV: %w", err)
		}
		logq = network.MaskLogProb(logits, masks, logq)
		p := lf.ModelPosterior(s.X, s.Lambda)
		tv, qsum := 0.0, 0.0
		for m, lq := range logq {
			q := math.Exp(lq)
			qsum += q
			tv += math.Abs(q - p[m])
		}
		tv = 0.5 * (tv + math.Max(0, 1-qsum))
		mean += tv / float64(n)
		worst = math.Max(worst, tv)
	}
	return mean, worst, nil
}

// LingaussPriorTV is LingaussMaskTV for q = the mask prior p(M | λ): the
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
