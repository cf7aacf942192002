package dmrifit

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/gradtable"
	"github.com/prismsbi/prism/nifti"
)

// Reasons for skipping a voxel inside the mask (keys of Scan.Skipped).
const (
	SkipNonFinite   = "non-finite data"
	SkipB0          = "b0 <= 0"
	SkipImplausible = "implausible signal"
)

// Bounds beyond which a voxel's signal is implausible (SkipImplausible):
// diffusion only attenuates, so S/b0 stays near or below 1 up to noise; a
// ratio above MaxSignalRatio, or a b0 above MaxB0Ratio times the median
// b0 of the mask, is a corrupt value (1e30 written for a dropout, an
// overflow), not tissue.
const (
	MaxSignalRatio = gradtable.MaxSignalRatio
	MaxB0Ratio     = 1000.0
)

// BZero is the largest b-value (s/mm²) of a volume that counts as b = 0:
// those volumes normalise the signal (LoadScan).
const BZero = gradtable.BZero

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
	B0Volumes  int           // number of volumes with b ≤ gradtable.BZero
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

// LoadScan reads and preprocesses a scan as the reference code does: b0 is the
// mean of the volumes with b ≤ gradtable.BZero, every volume is divided by it,
// and mask voxels whose b0 is ≤ 0, whose series has a non-finite value or
// an implausible one (MaxSignalRatio, MaxB0Ratio) are skipped (counted in
// Skipped). Without a mask file the mask is AutoMask(b0).
//
// Inputs that cannot give a meaningful posterior are errors naming the
// file: a table that gradtable.CheckDesign refuses (no diffusion
// weighting, b-values in another unit, too few distinct directions), and
// a mask whose matrix or voxel-to-world geometry differs from the DWI's
// (nifti.Header.SameGrid).
func LoadScan(files ScanFiles) (*Scan, error) {
	if files.DWI == "" || files.Bval == "" || files.Bvec == "" {
		return nil, errors.New("dmri: the DWI image, b-values and b-vectors are all required")
	}
	design, err := gradtable.ReadFSL(files.Bval, files.Bvec)
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
	if err := gradtable.CheckDesign(design); err != nil {
		return nil, fmt.Errorf("dmri: %s, %s: %w", files.Bval, files.Bvec, err)
	}
	// Keep a copy of the header only, so that the image data can be freed
	// once the signals are extracted.
	ref := img.Header
	s := &Scan{Files: files, Ref: &ref, Nx: nx, Ny: ny, Nz: nz, Design: design, Skipped: map[string]int{}}
	var b0Idx []int
	for j := 0; j < design.N; j++ {
		if design.Row(j)[0] <= gradtable.BZero {
			b0Idx = append(b0Idx, j)
		}
	}
	if len(b0Idx) == 0 {
		return nil, fmt.Errorf("dmri: %s has no b ≤ %v s/mm² volume to normalise by", files.Bval, gradtable.BZero)
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
		if err := ref.SameGrid(&m.Header); err != nil {
			return nil, fmt.Errorf("dmri: mask %s is not on the grid of %s: %w", files.Mask, files.DWI, err)
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
	maxB0 := MaxB0Ratio * maskMedian(b0, s.Mask)
	for i := 0; i < nv; i++ {
		if !s.Mask[i] {
			continue
		}
		img.VoxelInto(series, i)
		finite, plausible := true, b0[i] <= maxB0
		for _, v := range series {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				finite = false
				break
			}
			if math.Abs(float64(v)) > MaxSignalRatio*b0[i] {
				plausible = false
			}
		}
		switch {
		case !finite:
			s.Skipped[SkipNonFinite]++
			continue
		case !(b0[i] > 0):
			s.Skipped[SkipB0]++
			continue
		case !plausible:
			s.Skipped[SkipImplausible]++
			continue
		}
		s.Voxels = append(s.Voxels, i)
		for _, v := range series {
			s.Signal = append(s.Signal, float64(v)/b0[i])
		}
	}
	return s, nil
}

// maskMedian returns the median of the finite positive b0 values in the
// mask (+Inf when there are none, so that no voxel exceeds a multiple).
func maskMedian(b0 []float64, mask []bool) float64 {
	var v []float64
	for i, x := range b0 {
		if mask[i] && x > 0 && !math.IsInf(x, 0) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.Inf(1)
	}
	sort.Float64s(v)
	return v[len(v)/2]
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
