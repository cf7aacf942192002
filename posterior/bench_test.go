package posterior

import (
	"testing"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/internal/benchcpu"
	"github.com/prismsbi/prism/network"
)

// The benchmarks use untrained networks at network.DefaultConfig (speed
// does not depend on the weights) and report, besides wall time,
// cpu-s/op: the process CPU time per operation, the stable figure on a
// shared machine (on an idle machine wall ≈ cpu-s/op ÷ 2 cores).
//
//	go test -run '^$' -bench . -benchtime 5x ./posterior

func benchPosterior(b *testing.B, name string) *Posterior {
	b.Helper()
	f, err := family.Lookup(name)
	if err != nil {
		b.Fatal(err)
	}
	net, err := network.New(f, network.DefaultConfig(f), 1)
	if err != nil {
		b.Fatal(err)
	}
	return New(net)
}

// allOn returns the mask with every base component and the first noise
// component on: the largest parameter space of the family.
func allOn(f family.Family) []bool {
	comps := f.Components()
	m := make([]bool, len(comps))
	noise := false
	for i, c := range comps {
		if c.Kind == family.Base {
			m[i] = true
		} else if !noise {
			m[i], noise = true, true
		}
	}
	return m
}

// BenchmarkSampleMasks draws 1000 masks from q(M | x, λ) for one
// symbolic-k15 observation (C = 20): goal ≤ 0.1 s.
func BenchmarkSampleMasks(b *testing.B) {
	p := benchPosterior(b, "symbolic-k15")
	obs, _ := simulated(b, p.fam, 1, 1)
	run := func() {
		if _, err := p.SampleMasks(obs, 0.5, 1000, Options{Seed: 1}); err != nil {
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
}

// BenchmarkSampleTheta draws 1000 θ samples for one b3s observation under
// the full model (ball + 3 sticks, all 12 latents active) with 32 AB2
// steps (32 network evaluations): goal ≤ 1 s. The Heun variant takes 64
// evaluations for the same 32 steps.
func BenchmarkSampleTheta(b *testing.B) {
	for _, solver := range []Solver{AB2, Heun} {
		b.Run(solver.String(), func(b *testing.B) {
			p := benchPosterior(b, "b3s")
			obs, _ := simulated(b, p.fam, 1, 1)
			rows := [][][]bool{Repeat(allOn(p.fam), 1000)}
			so := SampleOptions{Options: Options{Seed: 1}, Steps: 32, Solver: solver}
			run := func() {
				if _, err := p.SampleTheta(obs, rows, so); err != nil {
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

// BenchmarkSampleAndLogProb is BenchmarkSampleTheta (AB2) with log q:
// 12 VJPs per step on top of each evaluation, for 1000 samples.
func BenchmarkSampleAndLogProb(b *testing.B) {
	p := benchPosterior(b, "b3s")
	obs, _ := simulated(b, p.fam, 1, 1)
	rows := [][][]bool{Repeat(allOn(p.fam), 1000)}
	so := SampleOptions{Options: Options{Seed: 1}, Steps: 32}
	run := func() {
		if _, err := p.SampleAndLogProb(obs, rows, so); err != nil {
			b.Fatal(err)
		}
	}
	cpu0 := benchcpu.Start()
	b.ResetTimer()
	for range b.N {
		run()
	}
	benchcpu.Report(b, cpu0)
}

// BenchmarkJointVoxels is a brain-like workload: 200 b3s observations
// (voxels, one protocol) with 50 joint samples each (M ~ q(M|x,λ), then
// θ | M with 32 AB2 steps), i.e. 10,000 parameter samples.
func BenchmarkJointVoxels(b *testing.B) {
	p := benchPosterior(b, "b3s")
	obs, _ := simulated(b, p.fam, 200, 2)
	so := SampleOptions{Options: Options{Seed: 1}, Steps: 32}
	run := func() {
		if _, err := p.SampleJoint(obs, 0.3, 50, false, so); err != nil {
			b.Fatal(err)
		}
	}
	cpu0 := benchcpu.Start()
	b.ResetTimer()
	for range b.N {
		run()
	}
	benchcpu.Report(b, cpu0)
	b.ReportMetric(float64(200*50*b.N)/b.Elapsed().Seconds(), "samples/s")
}
