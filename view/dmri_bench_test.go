package view

import (
	"path/filepath"
	"testing"

	"github.com/prismsbi/prism/data"
	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/models"
)

// BenchmarkRefitSlice refits the model posterior of the bundled
// whole-brain scan (72×72×39, 48,885 voxels) with the shipped b3s-brain
// network of `prism view --example`: the middle axial slice (what one
// slice refit costs) and the three middle slices (what the page refits
// when the λ slider is released).
func BenchmarkRefitSlice(b *testing.B) {
	dir := b.TempDir()
	if err := data.CopyTo(dir); err != nil {
		b.Fatal(err)
	}
	s, err := dmrifit.LoadScan(dmrifit.ScanFiles{DWI: filepath.Join(dir, data.ScanDWI), Bval: filepath.Join(dir, data.ScanBval),
		Bvec: filepath.Join(dir, data.ScanBvec), Mask: filepath.Join(dir, data.ScanMask)})
	if err != nil {
		b.Fatal(err)
	}
	p, err := models.Open("b3s-brain")
	if err != nil {
		b.Fatal(err)
	}
	d, err := NewDMRI(s, p, "", "model:b3s-brain", DefaultDMRISettings())
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		axes []int
	}{{"axial", []int{Axial}}, {"three-slices", []int{Sagittal, Coronal, Axial}}} {
		b.Run(c.name, func(b *testing.B) {
			lam, voxels := 0.1, 0
			cpu := cpuSeconds(b)
			for b.Loop() {
				lam += 0.17
				if lam >= 0.95 {
					lam -= 0.85
				}
				res, err := d.Refit(lam, s.Nx/2, s.Ny/2, s.Nz/2, c.axes)
				if err != nil {
					b.Fatal(err)
				}
				voxels = res.Voxels
			}
			b.ReportMetric(float64(voxels), "voxels")
			b.ReportMetric((cpuSeconds(b)-cpu)/float64(b.N), "cpu-s/op")
		})
	}
}
