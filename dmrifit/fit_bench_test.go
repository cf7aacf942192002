package dmrifit

import (
	"path/filepath"
	"testing"

	fdmri "github.com/prismsbi/prism/family/dmri"
	"github.com/prismsbi/prism/network"
	"github.com/prismsbi/prism/posterior"
	"github.com/prismsbi/prism/train"
)

// BenchmarkFitBatch fits 32 voxels of the real slab (102 measurements)
// with an untrained network of the configs/b3s.yaml architecture (the
// cost does not depend on the weights): 50 joint samples × 40 AB2 steps
// per voxel, without and with the 16-sample ESS. Reported: voxels/s and
// CPU seconds per voxel (the wall-clock rate depends on the machine's
// load, CPU time much less).
func BenchmarkFitBatch(b *testing.B) {
	cfg, err := train.LoadConfig("../configs/b3s.yaml", "b3s")
	if err != nil {
		b.Fatal(err)
	}
	net, err := network.New(fdmri.B3S(), cfg.Network, 1)
	if err != nil {
		b.Fatal(err)
	}
	post := posterior.New(net)
	dir := "../../shared/data/dmri/mrtrix3-msmt-slab"
	s, err := LoadScan(ScanFiles{DWI: filepath.Join(dir, "dwi.nii.gz"), Bval: filepath.Join(dir, "dwi.bval"),
		Bvec: filepath.Join(dir, "dwi.bvec"), Mask: filepath.Join(dir, "mask.nii.gz")})
	if err != nil {
		b.Fatal(err)
	}
	const n = 32
	for _, ess := range []int{0, 16} {
		name := "samples50-steps40"
		if ess > 0 {
			name += "-ess16"
		}
		b.Run(name, func(b *testing.B) {
			set := DefaultFitSettings()
			set.ESSSamples = ess
			ft, err := NewFitter(post, set)
			if err != nil {
				b.Fatal(err)
			}
			cpu := cpuSeconds()
			b.ResetTimer()
			for range b.N {
				if _, err := ft.FitBatch(s, 0, n); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "voxels/s")
			b.ReportMetric((cpuSeconds()-cpu)/float64(n*b.N), "cpu-s/voxel")
		})
	}
}
