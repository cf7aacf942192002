package symbolic

import (
	"math/rand/v2"
	"testing"

	"github.com/prismsbi/prism/family"
)

// BenchmarkSimulateK50 measures the training-time simulator: symbolic-k50 at
// λ = 0.5 (≈ 25 active functions) through family.SimulateBatch, which uses
// every core. One op is a batch of 512 samples; sims/s is the throughput.
func BenchmarkSimulateK50(b *testing.B) {
	f, _ := New(50)
	opt := family.SimOptions{Seed: 1, Lambda: 0.5}
	batch := make([]family.Sample, 512)
	family.SimulateBatch(f, opt, 0, batch) // allocate the sample buffers
	b.ReportAllocs()
	b.ResetTimer()
	var start uint64
	for b.Loop() {
		start += uint64(len(batch))
		family.SimulateBatch(f, opt, start, batch)
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "sims/s")
}

// BenchmarkLogLikelihoodGradK50 measures ℓ and ∂ℓ/∂θ for one sample with
// ≈ 25 active functions (single core), the cost of one MCMC or KSD step.
func BenchmarkLogLikelihoodGradK50(b *testing.B) {
	f, _ := New(50)
	d := GridDesign()
	r := rand.New(rand.NewPCG(1, 2))
	mask := make([]bool, len(f.ids))
	f.MaskPrior().Sample(r, 0.5, mask)
	theta := make([]float64, f.layout.DMax)
	for i := range theta {
		theta[i] = r.NormFloat64()
	}
	x := make([]float64, d.N)
	f.Simulate(r, d, theta, mask, x)
	grad := make([]float64, f.layout.DMax)
	b.ReportAllocs()
	for b.Loop() {
		f.LogLikelihood(d, x, theta, mask, grad)
	}
}
