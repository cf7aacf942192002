package nifti

import (
	"fmt"
	"math"
)

// Volume is a NIfTI image in memory: its header and its voxel values as
// float32 in NIfTI order (x fastest, then y, z and the volume index), with
// scl_slope/scl_inter already applied. Header.Datatype is the on-disk
// type: the one read, and the one Write stores.
type Volume struct {
	Header
	Data []float32
}

// New returns a zero-filled volume of the given dimensions (1 to 7 of
// them) and datatype, with 1 mm voxels, unit scaling and no qform or
// sform (so VoxelToWorld is the identity).
func New(dt Datatype, dims ...int) (*Volume, error) {
	h := Header{Datatype: dt, SclSlope: 1}
	h.Pixdim = [8]float64{1, 1, 1, 1, 1, 1, 1, 1}
	h.SetUnits(UnitsMM, UnitsUnknown)
	return newVolume(h, dims)
}

// NewLike returns a zero-filled volume on the grid of ref, for writing a
// map derived from the image ref describes: it copies ref's voxel sizes,
// qfac, qform, sform and their codes, spatial units and dim_info. dims are
// the full dimensions; the first three must equal ref's (a 3-D map is
// NewLike(ref, dt, nx, ny, nz), a series of n maps NewLike(ref, dt, nx,
// ny, nz, n)); with no dims the volume is 3-D on ref's grid. The header
// version follows ref (0, automatic, for a fresh header). Pixdim[4..7]
// are 1 and no time unit is set; scaling is 1·x+0; the description,
// intent, calibration, slice timing and extensions start empty.
func NewLike(ref *Header, dt Datatype, dims ...int) (*Volume, error) {
	if len(dims) == 0 {
		dims = []int{int(ref.Dim[1]), int(ref.Dim[2]), int(ref.Dim[3])}
	}
	if len(dims) < 3 || int64(dims[0]) != ref.Dim[1] || int64(dims[1]) != ref.Dim[2] || int64(dims[2]) != ref.Dim[3] {
		return nil, fmt.Errorf("nifti: NewLike: dims %v do not start with the reference grid %d×%d×%d",
			dims, ref.Dim[1], ref.Dim[2], ref.Dim[3])
	}
	h := Header{
		Version:   ref.Version,
		Datatype:  dt,
		SclSlope:  1,
		DimInfo:   ref.DimInfo,
		QformCode: ref.QformCode, SformCode: ref.SformCode,
		QuaternB: ref.QuaternB, QuaternC: ref.QuaternC, QuaternD: ref.QuaternD,
		QoffsetX: ref.QoffsetX, QoffsetY: ref.QoffsetY, QoffsetZ: ref.QoffsetZ,
		Srow: ref.Srow,
	}
	h.Pixdim = [8]float64{ref.Pixdim[0], ref.Pixdim[1], ref.Pixdim[2], ref.Pixdim[3], 1, 1, 1, 1}
	h.SetUnits(ref.SpatialUnits(), UnitsUnknown)
	return newVolume(h, dims)
}

func newVolume(h Header, dims []int) (*Volume, error) {
	if !h.Datatype.Supported() {
		return nil, fmt.Errorf("nifti: datatype %v is not supported", h.Datatype)
	}
	if len(dims) < 1 || len(dims) > 7 {
		return nil, fmt.Errorf("nifti: %d dimensions, want 1..7", len(dims))
	}
	h.Dim = [8]int64{int64(len(dims)), 1, 1, 1, 1, 1, 1, 1}
	n := 1
	for i, d := range dims {
		if d < 1 || d > math.MaxInt32 {
			return nil, fmt.Errorf("nifti: dimension %d is %d, want 1..2³¹-1", i+1, d)
		}
		if n > maxValues/d {
			return nil, fmt.Errorf("nifti: dims %v are too large", dims)
		}
		n *= d
		h.Dim[i+1] = int64(d)
	}
	return &Volume{Header: h, Data: make([]float32, n)}, nil
}

// Shape returns the three spatial sizes and the number of volumes (the
// product of dimensions 4 to 7).
func (v *Volume) Shape() (nx, ny, nz, nt int) {
	return int(v.Dim[1]), int(v.Dim[2]), int(v.Dim[3]), v.NumVolumes()
}

// Index returns the offset of voxel (x, y, z) within one 3-D volume.
func (v *Volume) Index(x, y, z int) int {
	return x + int(v.Dim[1])*(y+int(v.Dim[2])*z)
}

// At returns the value of voxel (x, y, z) in volume t (t = 0 for a 3-D
// image). It panics if an index is out of range.
func (v *Volume) At(x, y, z, t int) float32 {
	v.check(x, y, z, t)
	return v.Data[v.Index(x, y, z)+v.NumVoxels()*t]
}

// Set stores val at voxel (x, y, z) of volume t.
func (v *Volume) Set(x, y, z, t int, val float32) {
	v.check(x, y, z, t)
	v.Data[v.Index(x, y, z)+v.NumVoxels()*t] = val
}

func (v *Volume) check(x, y, z, t int) {
	nx, ny, nz, nt := v.Shape()
	if uint(x) >= uint(nx) || uint(y) >= uint(ny) || uint(z) >= uint(nz) || uint(t) >= uint(nt) {
		panic(fmt.Sprintf("nifti: voxel (%d, %d, %d, %d) out of range %d×%d×%d×%d", x, y, z, t, nx, ny, nz, nt))
	}
}

// Frame returns volume t as a slice of Data (no copy).
func (v *Volume) Frame(t int) []float32 {
	n := v.NumVoxels()
	return v.Data[t*n : (t+1)*n : (t+1)*n]
}

// Voxel returns the series of values of the voxel with spatial index i
// (see Index) across all volumes, in a new slice.
func (v *Volume) Voxel(i int) []float32 {
	return v.VoxelInto(make([]float32, v.NumVolumes()), i)
}

// VoxelInto copies the series of voxel i into dst, which must have length
// NumVolumes(), and returns it.
func (v *Volume) VoxelInto(dst []float32, i int) []float32 {
	n, nt := v.NumVoxels(), v.NumVolumes()
	if uint(i) >= uint(n) || len(dst) != nt {
		panic(fmt.Sprintf("nifti: VoxelInto(len %d, %d) on %d voxels × %d volumes", len(dst), i, n, nt))
	}
	for t := range dst {
		dst[t] = v.Data[i+t*n]
	}
	return dst
}

// SetVoxel stores the series src (length NumVolumes()) at voxel i.
func (v *Volume) SetVoxel(i int, src []float32) {
	n, nt := v.NumVoxels(), v.NumVolumes()
	if uint(i) >= uint(n) || len(src) != nt {
		panic(fmt.Sprintf("nifti: SetVoxel(%d, len %d) on %d voxels × %d volumes", i, len(src), n, nt))
	}
	for t, x := range src {
		v.Data[i+t*n] = x
	}
}
