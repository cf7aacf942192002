package network

import (
	"math"
	"testing"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/engine/optim"
	"github.com/prismsbi/prism/family"
)

// BenchmarkTrainStep times one training step at DefaultConfig with batch
// 256: forward of both decoders, backward, and the optimiser update (AGC,
// RAdam, EMA). Simulation and MakeBatch are outside the timed loop.
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
			samples := make([]family.Sample, bs)
			family.SimulateBatch(n.fam, family.SimOptions{Seed: 1, Lambda: math.NaN(), Designs: fixedDesign(b, n)}, 0, samples)
			var batch Batch
			if err := n.MakeBatch(samples, 1, &batch); err != nil {
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
			b.ResetTimer()
			for range b.N {
				step()
			}
			b.ReportMetric(float64(bs*b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

// fixedDesign returns one design of the family's default mix for every
// sample of a benchmark batch (a batch needs one length; dMRI protocols
// differ in length).
func fixedDesign(b *testing.B, n *Net) family.DesignSampler {
	ds, err := n.fam.Designs("")
	if err != nil {
		b.Fatal(err)
	}
	s := simulate(n.fam, 1, 0, 1)
	_ = ds
	return family.FixedDesign(s[0].Design)
}
