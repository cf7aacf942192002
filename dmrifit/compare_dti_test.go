package dmrifit

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/prismsbi/prism/nifti"
)

// TestCompareDTI builds a folder whose dyads1 deviate from a DTI folder's
// V1 by known angles (0°, 10°, 20°, 30° about z) and checks the statistics,
// the FA threshold and the f1 threshold (exact up to float32 rounding of
// the vectors: 1e-3°).
func TestCompareDTI(t *testing.T) {
	const nx, ny, nz = 6, 1, 1
	nv := nx * ny * nz
	dir := t.TempDir()
	vol := func(tdim int) *nifti.Volume {
		v, err := nifti.New(nifti.Float32, nx, ny, nz, tdim)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v1, fa, dy, f1 := vol(3), vol(1), vol(3), vol(1)
	deg := []float64{0, 10, 20, 30, 45, 60}
	faVals := []float32{0.7, 0.8, 0.6, 0.9, 0.2, 0.7}  // voxel 4 below FA 0.5
	f1Vals := []float32{0.5, 0.4, 0.3, 0.6, 0.5, 0.01} // voxel 5 without a stick
	f := &Folder{Dir: "fit", Nx: nx, Ny: ny, Nz: nz, Mask: make([]bool, nv), Fibres: 1}
	for i := range nv {
		f.Mask[i] = true
		v1.Data[i], v1.Data[i+nv], v1.Data[i+2*nv] = 1, 0, 0
		r := deg[i] * math.Pi / 180
		dy.Data[i], dy.Data[i+nv], dy.Data[i+2*nv] = float32(-math.Cos(r)), float32(math.Sin(r)), 0 // sign must not matter
		fa.Data[i], f1.Data[i] = faVals[i], f1Vals[i]
	}
	f.Dyads[0], f.F[0] = dy.Data, f1.Data
	for name, v := range map[string]*nifti.Volume{"dti_V1": v1, "dti_FA": fa} {
		if err := nifti.Write(filepath.Join(dir, name+".nii.gz"), v); err != nil {
			t.Fatal(err)
		}
	}
	c, err := CompareDTI(f, dir, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if c.VoxelsFA != 5 || c.Angle.N != 4 {
		t.Fatalf("voxels with FA > 0.5: %d (want 5), compared: %d (want 4)", c.VoxelsFA, c.Angle.N)
	}
	if math.Abs(c.Angle.Mean-15) > 1e-3 {
		t.Fatalf("mean angle %v, want 15", c.Angle.Mean)
	}
	if err := os.Remove(filepath.Join(dir, "dti_FA.nii.gz")); err != nil {
		t.Fatal(err)
	}
	if _, err := CompareDTI(f, dir, 0.5); err == nil {
		t.Fatal("missing dti_FA gave no error")
	}
}
