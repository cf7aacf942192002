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
		return acc, fmt.Errorf("train: LingaussMaskAccuracy needs a lingauss-k6 network, got %s", net.Family().Name())
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
