package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prismsbi/prism/nifti"
)

// bundledScanDir is the real whole-brain scan shipped in data/.
const bundledScanDir = "../../data/xa30-prisma-b2500-wholebrain"

// cropBlock is a block of voxels [X0, X0+Nx) × … of a grid.
type cropBlock struct{ X0, Y0, Z0, Nx, Ny, Nz int }

// cropNIfTI writes the block of the image src (3-D or 4-D) to dst,
// shifting the qform/sform origins so that every voxel keeps its world
// position.
func cropNIfTI(t *testing.T, src, dst string, c cropBlock) {
	t.Helper()
	in, err := nifti.Read(src)
	if err != nil {
		t.Fatal(err)
	}
	nx, ny, nz, nt := in.Shape()
	dims := []int{c.Nx, c.Ny, c.Nz}
	if in.Dim[0] > 3 {
		dims = append(dims, nt)
	}
	out, err := nifti.New(in.Datatype, dims...)
	if err != nil {
		t.Fatal(err)
	}
	h := &out.Header
	h.Pixdim = in.Pixdim
	h.XYZTUnits = in.XYZTUnits
	h.QformCode, h.SformCode = in.QformCode, in.SformCode
	h.QuaternB, h.QuaternC, h.QuaternD = in.QuaternB, in.QuaternC, in.QuaternD
	q := in.QformMatrix()
	h.QoffsetX, h.QoffsetY, h.QoffsetZ = q.Apply(float64(c.X0), float64(c.Y0), float64(c.Z0))
	sf := in.SformMatrix()
	h.Srow = in.Srow
	h.Srow[0][3], h.Srow[1][3], h.Srow[2][3] = sf.Apply(float64(c.X0), float64(c.Y0), float64(c.Z0))
	for tt := range nt {
		for z := range c.Nz {
			for y := range c.Ny {
				for x := range c.Nx {
					out.Data[x+c.Nx*(y+c.Ny*z)+tt*c.Nx*c.Ny*c.Nz] = in.Data[(c.X0+x)+nx*((c.Y0+y)+ny*(c.Z0+z))+tt*nx*ny*nz]
				}
			}
		}
	}
	if err := nifti.Write(dst, out); err != nil {
		t.Fatal(err)
	}
}

// copyFile copies src to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// cropBundled writes a block of the bundled scan as dir/dwi.nii.gz with
// its bval, bvec and cropped mask, and returns the `dmri fit` input flags.
func cropBundled(t *testing.T, dir string, c cropBlock) []string {
	t.Helper()
	cropNIfTI(t, filepath.Join(bundledScanDir, "dwi_PA.nii.gz"), filepath.Join(dir, "dwi.nii.gz"), c)
	cropNIfTI(t, filepath.Join(bundledScanDir, "mask.nii.gz"), filepath.Join(dir, "mask.nii.gz"), c)
	copyFile(t, filepath.Join(bundledScanDir, "dwi_PA.bval"), filepath.Join(dir, "dwi.bval"))
	copyFile(t, filepath.Join(bundledScanDir, "dwi_PA.bvec"), filepath.Join(dir, "dwi.bvec"))
	return []string{"--dwi", filepath.Join(dir, "dwi.nii.gz"), "--bval", filepath.Join(dir, "dwi.bval"),
		"--bvec", filepath.Join(dir, "dwi.bvec"), "--mask", filepath.Join(dir, "mask.nii.gz")}
}
