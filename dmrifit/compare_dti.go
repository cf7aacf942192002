package dmrifit

import (
	"fmt"
	"math"
	"path/filepath"

	"github.com/prismsbi/prism/nifti"
)

// DTIComparison is the JSON summary of CompareDTI.
type DTIComparison struct {
	Dir    string  `json:"dir"`
	DTIDir string  `json:"dti_dir"`
	FAMin  float64 `json:"fa_min"`
	// Angle (degrees, 0–90) between dyads1 and the tensor's principal
	// eigenvector V1 over mask voxels with FA > FAMin and mean f1 >
	// FibreThreshold.
	Angle Stats `json:"angle_deg"`
	// VoxelsFA is the number of mask voxels with FA > FAMin; Angle.N of
	// them have a first stick.
	VoxelsFA int `json:"voxels_fa"`
}

// CompareDTI compares dyads1 of a BedpostX-layout folder with dti_V1 of a
// `prism dmri dti` (or FSL dtifit) folder on the same grid, in voxels where
// the tensor is anisotropic (FA > faMin), the standard sanity check of a
// fibre-orientation fit. Both folders use FSL's vector convention.
func CompareDTI(a *Folder, dtiDir string, faMin float64) (*DTIComparison, error) {
	read := func(name string) (*nifti.Volume, error) {
		var err error
		for _, ext := range []string{".nii.gz", ".nii"} {
			var v *nifti.Volume
			if v, err = nifti.Read(filepath.Join(dtiDir, name+ext)); err == nil {
				return v, nil
			}
		}
		return nil, fmt.Errorf("dmri: %s: %w", dtiDir, err)
	}
	v1, err := read("dti_V1")
	if err != nil {
		return nil, err
	}
	fa, err := read("dti_FA")
	if err != nil {
		return nil, err
	}
	nv := a.Nx * a.Ny * a.Nz
	if x, y, z, t := v1.Shape(); x != a.Nx || y != a.Ny || z != a.Nz || t != 3 {
		return nil, fmt.Errorf("dmri: %s: dti_V1 is %d×%d×%d×%d, want %d×%d×%d×3", dtiDir, x, y, z, t, a.Nx, a.Ny, a.Nz)
	}
	if x, y, z, t := fa.Shape(); x != a.Nx || y != a.Ny || z != a.Nz || t != 1 {
		return nil, fmt.Errorf("dmri: %s: dti_FA is %d×%d×%d×%d, want %d×%d×%d", dtiDir, x, y, z, t, a.Nx, a.Ny, a.Nz)
	}
	if a.Ref != nil {
		for _, im := range []struct {
			name string
			h    *nifti.Header
		}{{"dti_V1", &v1.Header}, {"dti_FA", &fa.Header}} {
			if err := a.Ref.SameGrid(im.h); err != nil {
				return nil, fmt.Errorf("dmri: %s: %s is not on the grid of %s: %w", dtiDir, im.name, a.Dir, err)
			}
		}
	}
	if a.Fibres == 0 {
		return nil, fmt.Errorf("dmri: %s has no dyads1", a.Dir)
	}
	c := &DTIComparison{Dir: a.Dir, DTIDir: dtiDir, FAMin: faMin}
	var angles []float64
	for i := 0; i < nv; i++ {
		if !a.Mask[i] || !(float64(fa.Data[i]) > faMin) {
			continue
		}
		c.VoxelsFA++
		if a.F[0][i] <= FibreThreshold {
			continue
		}
		if ang := dyadAngle(a.Dyads[0], v1.Data, i, nv); !math.IsNaN(ang) {
			angles = append(angles, ang)
		}
	}
	c.Angle = statsOf(angles)
	return c, nil
}
