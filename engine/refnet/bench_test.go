package refnet

import (
	"testing"

	"github.com/prismsbi/prism/internal/benchcpu"
)

// Benchmarks of issue 2's reference network. bench/engine_vs_torch.sh
// parses their names, ns/op and the flop/step metric:
//
//	go test -run '^$' -bench RefNet -benchmem ./engine/refnet
//
// Besides wall time they report cpu-s/op, the process CPU time (all
// threads) per iteration: on a machine shared with other jobs wall time
// swings by 2× while CPU time stays put, and on an idle machine wall time
// is about cpu-s/op divided by the two cores.

func newBenchNet(b *testing.B) *Net {
	b.Helper()
	n, err := New(DefaultConfig(), 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(n.Close)
	return n
}

// BenchmarkRefNetStep is one training step at batch 256: forward, backward,
// AGC + RAdam + EMA. It reports the step's analytic FLOP count (flop/step)
// and the rate it achieves (GFLOP/s).
func BenchmarkRefNetStep(b *testing.B) {
	n := newBenchNet(b)
	for range 2 { // warm-up: arena and optimiser state reach their final size
		if _, err := n.Step(); err != nil {
			b.Fatal(err)
		}
	}
	flops := n.FLOPs()
	b.ReportAllocs()
	cpu0 := benchcpu.Start()
	b.ResetTimer()
	for b.Loop() {
		if _, err := n.Step(); err != nil {
			b.Fatal(err)
		}
	}
	benchcpu.Report(b, cpu0)
	b.ReportMetric(flops, "flop/step")
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkRefNetInfer is the parameter decoder's tape-free forward pass at
// batch 1000 with the encoder output precomputed.
func BenchmarkRefNetInfer(b *testing.B) {
	n := newBenchNet(b)
	n.InferParamDecoder(n.Infer) // warm-up; computes the encoder output once
	flops := n.cfg.InferFLOPs()
	b.ReportAllocs()
	cpu0 := benchcpu.Start()
	b.ResetTimer()
	for b.Loop() {
		n.InferParamDecoder(n.Infer)
	}
	benchcpu.Report(b, cpu0)
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
