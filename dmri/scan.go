package dmri

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/prismsbi/prism/family"
	fdmri "github.com/prismsbi/prism/family/dmri"
	"github.com/prismsbi/prism/nifti"
)

// Reasons for skipping a voxel inside the mask (keys of Scan.Skipped).
const (
	SkipNonFinite = "non-finite data"
	SkipB0        = "b0 <= 0"
)

// ScanFiles names the inputs of a scan. Mask is optional.
type ScanFiles struct {
	DWI  string `json:"dwi"`
	Bval string `json:"bval"`
	Bvec string `json:"bvec"`
	Mask string `json:"mask,omitempty"`
}

// Scan is a preprocessed diffusion scan: the voxels to fit with their
// b0-normalised signals.
type Scan struct {
	Files      ScanFiles
	Ref        *nifti.Header // header of the DWI image (the output geometry)
	Nx, Ny, Nz int
	Design     family.Design // b, gx, gy, gz per volume, in file order
	B0Volumes  int           // number of volumes with b ≤ dmri.BZero
	B0         []float32     // mean b≈0 signal per voxel (whole grid)
	Mask       []bool        // brain mask over the grid (x fastest)
	MaskSource string        // "file" or "auto"

	// Voxels are the linear indices (x + nx(y + ny z)) of the mask voxels
	// that passed the checks, in increasing order; Signal holds their
	// normalised signals, voxel v at Signal[v*N:(v+1)*N].
	Voxels  []int
	Signal  []float64
	Skipped map[string]int // mask voxels skipped, by reason
}

// NumVoxels returns the number of voxels in the grid.
func (s *Scan) NumVoxels() int { return s.Nx * s.Ny * s.Nz }

// LoadScan reads and preprocesses a scan (reference-spec §2.7): b0 is the
// mean of the volumes with b ≤ dmri.BZero, every volume is divided by it,
// and mask voxels whose b0 is ≤ 0 or whose series has a non-finite value
// are skipped (counted in Skipped). Without a mask file the mask is
// AutoMask(b0).
func LoadScan(files ScanFiles) (*Scan, error) {
	if files.DWI == "" || files.Bval == "" || files.Bvec == "" {
		return nil, errors.New("dmri: the DWI image, b-values and b-vectors are all required")
	}
	design, err := fdmri.ReadFSL(files.Bval, files.Bvec)
	if err != nil {
		return nil, err
	}
	img, err := nifti.Read(files.DWI)
	if err != nil {
		return nil, fmt.Errorf("dmri: %w", err)
	}
	nx, ny, nz, nt := img.Shape()
	if img.Dim[0] != 4 && !(img.Dim[0] > 4 && nt == int(img.Dim[4])) {
		return nil, fmt.Errorf("dmri: %s: want a 4-D image, got %d dimensions", files.DWI, img.Dim[0])
	}
	if nt != design.N {
		return nil, fmt.Errorf("dmri: %s has %d volumes but %s lists %d b-values", files.DWI, nt, files.Bval, design.N)
	}
	// Keep a copy of the header only, so that the image data can be freed
	// once the signals are extracted.
	ref := img.Header
	s := &Scan{Files: files, Ref: &ref, Nx: nx, Ny: ny, Nz: nz, Design: design, Skipped: map[string]int{}}
	var b0Idx []int
	for j := 0; j < design.N; j++ {
		if design.Row(j)[0] <= fdmri.BZero {
			b0Idx = append(b0Idx, j)
		}
	}
	if len(b0Idx) == 0 {
		return nil, fmt.Errorf("dmri: %s has no b ≤ %v s/mm² volume to normalise by", files.Bval, fdmri.BZero)
	}
	s.B0Volumes = len(b0Idx)
	nv := s.NumVoxels()
	b0 := make([]float64, nv)
	s.B0 = make([]float32, nv)
	for i := range b0 {
		var sum float64
		for _, j := range b0Idx {
			sum += float64(img.Data[i+j*nv])
		}
		b0[i] = sum / float64(len(b0Idx))
		s.B0[i] = float32(b0[i])
	}
	if files.Mask != "" {
		m, err := nifti.Read(files.Mask)
		if err != nil {
			return nil, fmt.Errorf("dmri: mask: %w", err)
		}
		mx, my, mz, mt := m.Shape()
		if mx != nx || my != ny || mz != nz || mt != 1 {
			return nil, fmt.Errorf("dmri: mask %s is %d×%d×%d×%d, the DWI grid %d×%d×%d", files.Mask, mx, my, mz, mt, nx, ny, nz)
		}
		s.Mask = make([]bool, nv)
		for i, v := range m.Data {
			s.Mask[i] = v != 0 && !math.IsNaN(float64(v))
		}
		s.MaskSource = "file"
	} else {
		s.Mask = AutoMask(s.B0, nx, ny, nz)
		s.MaskSource = "auto"
	}
	n := design.N
	series := make([]float32, n)
	for i := 0; i < nv; i++ {
		if !s.Mask[i] {
			continue
		}
		img.VoxelInto(series, i)
		finite := true
		for _, v := range series {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				finite = false
				break
			}
		}
		switch {
		case !finite:
			s.Skipped[SkipNonFinite]++
			continue
		case !(b0[i] > 0):
			s.Skipped[SkipB0]++
			continue
		}
		s.Voxels = append(s.Voxels, i)
		for _, v := range series {
			s.Signal = append(s.Signal, float64(v)/b0[i])
		}
	}
	return s, nil
}

// MaskCount returns the number of voxels in the mask.
func (s *Scan) MaskCount() int {
	n := 0
	for _, m := range s.Mask {
		if m {
			n++
		}
	}
	return n
}

// SkippedTotal returns the number of mask voxels that were skipped.
func (s *Scan) SkippedTotal() int {
	n := 0
	for _, c := range s.Skipped {
		n += c
	}
	return n
}

// SkipReasons returns the skip reasons in sorted order.
func (s *Scan) SkipReasons() []string {
	r := make([]string, 0, len(s.Skipped))
	for k := range s.Skipped {
		r = append(r, k)
	}
	sort.Strings(r)
	return r
}
