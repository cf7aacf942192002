package dti

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/internal/cputime"
)

// cpuMicros returns the process CPU time in µs: the benchmarks report CPU
// µs per voxel beside voxels/s because the wall-clock rate depends on
// what else the shared machine is doing.
func cpuMicros() float64 {
	s, _ := cputime.Seconds()
	return s * 1e6
}

// noisyVoxels returns nv noisy voxels (Rician, SNR 30, white-matter
// tensors in random orientations) on design d, concatenated.
func noisyVoxels(d family.Design, nv int) []float64 {
	r := rand.New(rand.NewPCG(21, 22))
	out := make([]float64, 0, nv*d.N)
	for range nv {
		for _, c := range signal(d, tensor([3]float64{1.4e-3, 0.35e-3, 0.25e-3}, randomRotation(r)), 1) {
			out = append(out, math.Hypot(c+r.NormFloat64()/30, r.NormFloat64()/30))
		}
	}
	return out
}

// BenchmarkFitVoxel fits one voxel at a time on one goroutine (UKB-like:
// 105 measurements; xa30: 21).
func BenchmarkFitVoxel(b *testing.B) {
	for name, d := range protocols(b) {
		b.Run(name, func(b *testing.B) {
			f, err := NewFitter(d, DefaultWLSIterations)
			if err != nil {
				b.Fatal(err)
			}
			const nv = 1024
			sig := noisyVoxels(d, nv)
			ws := f.NewWorkspace()
			b.ReportAllocs()
			cpu := cpuMicros()
			for i := 0; b.Loop(); i++ {
				v := i % nv
				f.FitVoxel(sig[v*d.N:(v+1)*d.N], ws)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "voxels/s")
			b.ReportMetric((cpuMicros()-cpu)/float64(b.N), "cpu-µs/voxel")
		})
	}
}

// BenchmarkFitVoxels fits 48,886 voxels (the xa30 whole-brain mask size)
// with FitVoxels on all cores.
func BenchmarkFitVoxels(b *testing.B) {
	for name, d := range protocols(b) {
		b.Run(name, func(b *testing.B) {
			f, err := NewFitter(d, DefaultWLSIterations)
			if err != nil {
				b.Fatal(err)
			}
			const nv = 48886
			sig := noisyVoxels(d, nv)
			fits, errs := make([]Fit, nv), make([]error, nv)
			cpu := cpuMicros()
			for b.Loop() {
				if err := f.FitVoxels(sig, fits, errs, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*nv/b.Elapsed().Seconds(), "voxels/s")
			b.ReportMetric((cpuMicros()-cpu)/float64(b.N*nv), "cpu-µs/voxel")
		})
	}
}
