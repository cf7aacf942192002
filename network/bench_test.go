package network

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/engine/optim"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/internal/benchcpu"
)

// The benchmarks report, besides wall time, cpu-s/op: the process CPU time
// per operation, which is less sensitive to other load on the shared
// machine (on an idle machine wall time ≈ cpu-s/op / 2 cores when both are
// busy).

// benchSamples simulates bs samples of one design of the family's default
// mix (a batch needs one length; dMRI protocols differ in length).
func benchSamples(n *Net, bs int) []family.Sample {
	s0 := simulate(n.fam, 1, 0, 1)
	s := make([]family.Sample, bs)
	family.SimulateBatch(n.fam, family.SimOptions{Seed: 1, Lambda: math.NaN(), Designs: family.FixedDesign(s0[0].Design)}, 0, s)
	return s
}

// BenchmarkTrainStep times one training step at DefaultConfig with batch
// 256: forward through both decoders, backward, and the optimiser update
// (AGC, RAdam, EMA). Simulation and MakeBatch are outside the timed loop.
//
//	go test -run '^$' -bench TrainStep -benchtime 20x ./network
func BenchmarkTrainStep(b *testing.B) {
	for _, name := range []string{"lingauss-k6", "symbolic-k15", "b3s"} {
		b.Run(name, func(b *testing.B) {
			n := newNet(b, name, DefaultConfig, 1)
			opt, err := optim.New(n.Params().OptimParams(), optim.DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			defer opt.Close()
			const bs = 256
			var batch Batch
			if err := n.MakeBatch(benchSamples(n, bs), 1, &batch); err != nil {
				b.Fatal(err)
			}
			g := engine.NewGraph()
			step := func() {
				g.Reset()
				tot, _, _ := n.Loss(g, &batch)
				n.Params().ZeroGrad()
				g.Backward(tot)
				if err := opt.Step(); err != nil {
					b.Fatal(err)
				}
			}
			step()
			cpu0 := benchcpu.Start()
			b.ResetTimer()
			for range b.N {
				step()
			}
			benchcpu.Report(b, cpu0)
			b.ReportMetric(float64(bs*b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

// BenchmarkDenoise times one denoiser evaluation (an ODE step of the
// posterior sampler) for 1000 θ samples of one observation at
// DefaultConfig, on an inference graph with the encoder output
// precomputed.
func BenchmarkDenoise(b *testing.B) {
	for _, name := range []string{"symbolic-k15", "b3s"} {
		b.Run(name, func(b *testing.B) {
			n := newNet(b, name, DefaultConfig, 1)
			s := benchSamples(n, 1)
			ge := engine.NewInferenceGraph()
			enc := encodeSamples(b, n, ge, s)
			const rows = 1000
			masks := make([][]bool, rows)
			th := make([]float32, rows*n.dmax)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range masks {
				masks[i] = s[0].Mask
			}
			for i := range th {
				th[i] = float32(r.NormFloat64())
			}
			g := engine.NewInferenceGraph()
			run := func() {
				g.Reset()
				if _, err := n.Denoise(g, enc, masks, g.Input(th, rows, n.dmax), []float64{0.5}); err != nil {
					b.Fatal(err)
				}
			}
			run()
			cpu0 := benchcpu.Start()
			b.ResetTimer()
			for range b.N {
				run()
			}
			benchcpu.Report(b, cpu0)
		})
	}
}

// BenchmarkSampleMasks times drawing 1000 masks for one observation with
// the KV-cached autoregressive sampler at DefaultConfig.
func BenchmarkSampleMasks(b *testing.B) {
	for _, name := range []string{"symbolic-k15", "b3s"} {
		b.Run(name, func(b *testing.B) {
			n := newNet(b, name, DefaultConfig, 1)
			s := benchSamples(n, 1)
			ge := engine.NewInferenceGraph()
			enc := encodeSamples(b, n, ge, s)
			r := rand.New(rand.NewPCG(1, 2))
			cpu0 := benchcpu.Start()
			b.ResetTimer()
			for range b.N {
				if _, _, err := n.SampleMasks(enc, 0.5, 1000, r); err != nil {
					b.Fatal(err)
				}
			}
			benchcpu.Report(b, cpu0)
		})
	}
}

// BenchmarkMakeBatch times MakeBatch for lingauss-k6 at batch 32 (the
// validation runs' size) for each model decoder: the categorical decoder
// adds the prior bias of all |S| = 64 classes (copied per λ node).
//
//	go test -run '^$' -bench MakeBatch ./network
func BenchmarkMakeBatch(b *testing.B) {
	for _, tc := range []struct {
		name    string
		decoder string
		nodes   int
	}{{"autoregressive", AutoregressiveDecoder, 0}, {"categorical", CategoricalDecoder, 0}, {"categorical-nodes8", CategoricalDecoder, 8}} {
		b.Run(tc.name, func(b *testing.B) {
			n := newNet(b, "lingauss-k6", func(f family.Family) Config {
				c := tinyConfig(f)
				c.MaskDecoder, c.LambdaNodes = tc.decoder, tc.nodes
				return c
			}, 1)
			const bs = 32
			samples := benchSamples(n, bs)
			var batch Batch
			b.ResetTimer()
			for i := range b.N {
				if err := n.MakeBatch(samples, uint64(i), &batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(bs*b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

// BenchmarkDenoiseMasked times DenoiseMasked of the b3s network at
// DefaultConfig for 1000 rows of 50 observations (20 rows each, with
// precomputed cross-attention keys) under the six-token mask ball + 2
// sticks + noise, and under the eight-token full mask: the denoiser's call
// in the dMRI fit (segments of 120 and 160 queries).
func BenchmarkDenoiseMasked(b *testing.B) {
	n := newNet(b, "b3s", DefaultConfig, 1)
	s := benchSamples(n, 50)
	ge := engine.NewInferenceGraph()
	enc := encodeSamples(b, n, ge, s)
	cross := n.ParamCrossKV(ge, enc)
	const rows = 1000
	rowObs := make([]int, rows)
	for i := range rowObs {
		rowObs[i] = i / 20
	}
	th := make([]float32, rows*n.dmax)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range th {
		th[i] = float32(r.NormFloat64())
	}
	for _, mc := range []struct {
		name string
		mask []bool
	}{{"tokens6", []bool{true, true, true, false, true}}, {"tokens8", []bool{true, true, true, true, true}}} {
		b.Run(mc.name, func(b *testing.B) {
			g := engine.NewInferenceGraph()
			run := func() {
				g.Reset()
				if _, err := n.DenoiseMasked(g, enc, cross, mc.mask, rowObs, g.Input(th, rows, n.dmax), 0.5); err != nil {
					b.Fatal(err)
				}
			}
			run()
			cpu0 := benchcpu.Start()
			b.ResetTimer()
			for range b.N {
				run()
			}
			benchcpu.Report(b, cpu0)
		})
	}
}
