package eval

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkKSD: one observation's KSD with S = 100 samples in d = 6
// active dimensions and the four default bandwidths (the per-observation
// cost of rKSD is two of these).
func BenchmarkKSD(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	mu := []float64{0, 1, 2, 3, 4, 5}
	sd := []float64{0.1, 0.2, 0.5, 1, 2, 5}
	x, s := gaussSamples(r, 100, mu, sd, 0)
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := KSD(x, s, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUniformCEBand: the simulated perfect-posterior band at
// N = 1000 values with 1000 replicates, as computed for each `prism eval`
// run.
func BenchmarkUniformCEBand(b *testing.B) {
	for b.Loop() {
		if _, err := UniformCEBand(1000, 0, 1000, 0.95, 1); err != nil {
			b.Fatal(err)
		}
	}
}
