package dmrifit

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/prismsbi/prism/nifti"
)

// OutputExt is the file extension of every image WriteBedpostX writes.
const OutputExt = ".nii.gz"

// WriteBedpostX writes p into dir (created if needed) in BedpostX's file
// layout, every image on the grid and with the qform/sform of ref, zero
// outside p.Voxels. For each stick i = 1..p.Fibres:
//
//	merged_th{i}samples, merged_ph{i}samples, merged_f{i}samples
//	    4-D, one volume per sample: θ ∈ [0, π/2], φ ∈ (−π, π], f
//	mean_f{i}samples   posterior mean fraction
//	dyads{i}           4-D, 3 volumes: x, y, z of the principal axis of the
//	                   mean dyadic tensor (StickSamples.Dyad), z ≥ 0
//	dyads{i}_dispersion  1 − its largest eigenvalue
//	mean_th{i}samples, mean_ph{i}samples  θ and φ of dyads{i}
//
// and mean_dsamples, mean_d_stdsamples, mean_S0samples (posterior means)
// and nodif_brain_mask (uint8, the brain mask given). Vectors are in the
// frame of the input b-vectors (FSL's convention for FSL tables).
func WriteBedpostX(dir string, ref *nifti.Header, mask []bool, p *StickSamples) error {
	nx, ny, nz := int(ref.Dim[1]), int(ref.Dim[2]), int(ref.Dim[3])
	nv := nx * ny * nz
	if len(mask) != nv {
		return fmt.Errorf("dmri: mask has %d voxels, the grid %d×%d×%d", len(mask), nx, ny, nz)
	}
	for _, i := range p.Voxels {
		if i < 0 || i >= nv {
			return fmt.Errorf("dmri: voxel index %d outside the %d×%d×%d grid", i, nx, ny, nz)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("dmri: %w", err)
	}
	S := p.Samples
	write := func(name string, dt nifti.Datatype, vols int, fill func(v *nifti.Volume)) error {
		dims := []int{nx, ny, nz}
		if vols > 1 {
			dims = append(dims, vols)
		}
		vol, err := nifti.NewLike(ref, dt, dims...)
		if err != nil {
			return fmt.Errorf("dmri: %s: %w", name, err)
		}
		fill(vol)
		return nifti.Write(filepath.Join(dir, name+OutputExt), vol)
	}
	merged := func(name string, src []float32) error {
		return write(name, nifti.Float32, S, func(vol *nifti.Volume) {
			for v, i := range p.Voxels {
				for s := 0; s < S; s++ {
					vol.Data[i+s*nv] = src[v*S+s]
				}
			}
		})
	}
	mean := func(name string, src []float32) error {
		return write(name, nifti.Float32, 1, func(vol *nifti.Volume) {
			for v, i := range p.Voxels {
				vol.Data[i] = float32(meanOf(src[v*S : (v+1)*S]))
			}
		})
	}
	for f := 0; f < p.Fibres; f++ {
		k := f + 1
		if err := merged(fmt.Sprintf("merged_th%dsamples", k), p.Theta[f]); err != nil {
			return err
		}
		if err := merged(fmt.Sprintf("merged_ph%dsamples", k), p.Phi[f]); err != nil {
			return err
		}
		if err := merged(fmt.Sprintf("merged_f%dsamples", k), p.F[f]); err != nil {
			return err
		}
		if err := mean(fmt.Sprintf("mean_f%dsamples", k), p.F[f]); err != nil {
			return err
		}
		dyad := make([][3]float64, len(p.Voxels))
		disp := make([]float64, len(p.Voxels))
		for v := range p.Voxels {
			dyad[v], disp[v] = p.Dyad(f, v)
		}
		if err := write(fmt.Sprintf("dyads%d", k), nifti.Float32, 3, func(vol *nifti.Volume) {
			for v, i := range p.Voxels {
				for a := range 3 {
					vol.Data[i+a*nv] = float32(dyad[v][a])
				}
			}
		}); err != nil {
			return err
		}
		if err := write(fmt.Sprintf("dyads%d_dispersion", k), nifti.Float32, 1, func(vol *nifti.Volume) {
			for v, i := range p.Voxels {
				vol.Data[i] = float32(disp[v])
			}
		}); err != nil {
			return err
		}
		for c, name := range []string{"mean_th%dsamples", "mean_ph%dsamples"} {
			if err := write(fmt.Sprintf(name, k), nifti.Float32, 1, func(vol *nifti.Volume) {
				for v, i := range p.Voxels {
					th, ph := angles(dyad[v])
					vol.Data[i] = float32([2]float64{th, ph}[c])
				}
			}); err != nil {
				return err
			}
		}
	}
	for name, src := range map[string][]float32{"mean_dsamples": p.D, "mean_d_stdsamples": p.DStd, "mean_S0samples": p.S0} {
		if err := mean(name, src); err != nil {
			return err
		}
	}
	return write("nodif_brain_mask", nifti.Uint8, 1, func(vol *nifti.Volume) {
		for i, m := range mask {
			if m {
				vol.Data[i] = 1
			}
		}
	})
}

// writeMap writes the image name (vols volumes on the scan's grid, of
// type dt, zero but where fill sets it) into dir atomically (nifti.Write).
func (s *Scan) writeMap(dir, name string, dt nifti.Datatype, vols int, fill func(vol *nifti.Volume)) error {
	dims := []int{s.Nx, s.Ny, s.Nz}
	if vols > 1 {
		dims = append(dims, vols)
	}
	vol, err := nifti.NewLike(s.Ref, dt, dims...)
	if err != nil {
		return fmt.Errorf("dmri: %s: %w", name, err)
	}
	fill(vol)
	if err := nifti.Write(filepath.Join(dir, name+OutputExt), vol); err != nil {
		return fmt.Errorf("dmri: %w", err)
	}
	return nil
}
