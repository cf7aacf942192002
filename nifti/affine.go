package nifti

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Mat4 is a 4×4 affine matrix mapping voxel indices (i, j, k, 1), i along
// x (the fastest axis), to world coordinates (x, y, z, 1) in the units of
// SpatialUnits (normally mm, RAS+: x to the subject's right, y anterior,
// z superior).
type Mat4 [4][4]float64

// Apply maps the voxel coordinate (i, j, k) to world coordinates.
func (m *Mat4) Apply(i, j, k float64) (x, y, z float64) {
	x = m[0][0]*i + m[0][1]*j + m[0][2]*k + m[0][3]
	y = m[1][0]*i + m[1][1]*j + m[1][2]*k + m[1][3]
	z = m[2][0]*i + m[2][1]*j + m[2][2]*k + m[2][3]
	return x, y, z
}

// Det3 returns the determinant of the upper-left 3×3 (linear) block.
func (m *Mat4) Det3() float64 {
	return m[0][0]*(m[1][1]*m[2][2]-m[1][2]*m[2][1]) -
		m[0][1]*(m[1][0]*m[2][2]-m[1][2]*m[2][0]) +
		m[0][2]*(m[1][0]*m[2][1]-m[1][1]*m[2][0])
}

// positiveOr1 returns v if it is a positive number and 1 otherwise (NaN
// included), the rule nifti_clib applies to voxel sizes in transforms.
func positiveOr1(v float64) float64 {
	if v > 0 {
		return v
	}
	return 1
}

// Qfac returns the qform handedness factor from Pixdim[0]: -1 if it is
// negative, +1 otherwise (the standard reads 0 as +1).
func (h *Header) Qfac() float64 {
	if h.Pixdim[0] < 0 {
		return -1
	}
	return 1
}

// QformMatrix returns the qform voxel-to-world matrix built from the
// quaternion (b, c, d), a = sqrt(1-b²-c²-d²), the voxel sizes Pixdim[1..3]
// and qfac, as nifti1.h defines it:
//
//	[x y z]ᵀ = R · diag(dx, dy, qfac·dz) · [i j k]ᵀ + [qoffset_x qoffset_y qoffset_z]ᵀ
//
// It is returned whatever QformCode says. When b²+c²+d² is within 1e-7
// of 1 (a 180° rotation), (b, c, d) is renormalised and a = 0, as
// nifti_clib does. Non-positive voxel sizes count as 1.
func (h *Header) QformMatrix() Mat4 {
	b, c, d := h.QuaternB, h.QuaternC, h.QuaternD
	a := 1 - (b*b + c*c + d*d)
	if a < 1e-7 {
		n := 1 / math.Sqrt(b*b+c*c+d*d)
		b, c, d, a = b*n, c*n, d*n, 0
	} else {
		a = math.Sqrt(a)
	}
	dx, dy, dz := positiveOr1(h.Pixdim[1]), positiveOr1(h.Pixdim[2]), positiveOr1(h.Pixdim[3])
	dz *= h.Qfac()
	return Mat4{
		{(a*a + b*b - c*c - d*d) * dx, 2 * (b*c - a*d) * dy, 2 * (b*d + a*c) * dz, h.QoffsetX},
		{2 * (b*c + a*d) * dx, (a*a + c*c - b*b - d*d) * dy, 2 * (c*d - a*b) * dz, h.QoffsetY},
		{2 * (b*d - a*c) * dx, 2 * (c*d + a*b) * dy, (a*a + d*d - b*b - c*c) * dz, h.QoffsetZ},
		{0, 0, 0, 1},
	}
}

// SformMatrix returns the sform matrix (Srow plus the row 0 0 0 1),
// whatever SformCode says.
func (h *Header) SformMatrix() Mat4 {
	return Mat4{h.Srow[0], h.Srow[1], h.Srow[2], {0, 0, 0, 1}}
}

// VoxelToWorld returns the voxel-to-world matrix by the usual precedence
// (nibabel's and FSL's): the sform if SformCode > 0, else the qform if
// QformCode > 0, else a diagonal scaling by the voxel sizes Pixdim[1..3]
// (the standard's "method 1", non-positive sizes counting as 1).
func (h *Header) VoxelToWorld() Mat4 {
	switch {
	case h.SformCode > 0:
		return h.SformMatrix()
	case h.QformCode > 0:
		return h.QformMatrix()
	}
	return Mat4{
		{positiveOr1(h.Pixdim[1]), 0, 0, 0},
		{0, positiveOr1(h.Pixdim[2]), 0, 0},
		{0, 0, positiveOr1(h.Pixdim[3]), 0},
		{0, 0, 0, 1},
	}
}

// Determinant returns the determinant of the linear part of VoxelToWorld.
// Negative means the voxel axes are left-handed in world space
// ("radiological" storage, e.g. x running right to left in a RAS+ world);
// positive means "neurological" storage.
func (h *Header) Determinant() float64 {
	m := h.VoxelToWorld()
	return m.Det3()
}

// FSLFlipX reports whether FSL's voxel convention negates the x axis for
// this image, i.e. whether FSL treats it as neurologically stored. FSL
// (fslio's FslGetLeftRightOrder) takes the determinant of the sform if
// SformCode ≠ 0, else of the qform if QformCode ≠ 0, else assumes -1
// (radiological, the ANALYZE default), and flips when it is not negative.
//
// Vectors in FSL's voxel convention, such as bvec files and bedpostx
// dyads, relate to the image's own voxel axes by negating x when FSLFlipX
// is true: x_image = -x_fsl. The relation is its own inverse, so the same
// rule converts input b-vectors to voxel axes and output directions back.
func (h *Header) FSLFlipX() bool {
	det := -1.0
	switch {
	case h.SformCode != XformUnknown:
		m := h.SformMatrix()
		det = m.Det3()
	case h.QformCode != XformUnknown:
		m := h.QformMatrix()
		det = m.Det3()
	}
	return !(det < 0)
}

// SetSform stores the first three rows of m as the sform with the given
// code.
func (h *Header) SetSform(m Mat4, code XformCode) {
	h.Srow = [3][4]float64{m[0], m[1], m[2]}
	h.SformCode = code
}

// SetQform sets the qform fields (quaternion, offsets, Pixdim[0..3] and
// QformCode) so that QformMatrix reproduces m. The qform can only hold a
// rotation times positive voxel sizes (with a reflection of the third axis
// when det < 0): the columns' lengths become the voxel sizes and a
// non-orthogonal linear part is replaced by its nearest rotation (polar
// decomposition), as nifti_clib does. A singular m is an error.
func (h *Header) SetQform(m Mat4, code XformCode) error {
	var cols [3][3]float64 // cols[j] is column j
	var size [3]float64
	for j := range 3 {
		for i := range 3 {
			cols[j][i] = m[i][j]
		}
		size[j] = math.Sqrt(cols[j][0]*cols[j][0] + cols[j][1]*cols[j][1] + cols[j][2]*cols[j][2])
		if !(size[j] > 0) || math.IsInf(size[j], 0) {
			return fmt.Errorf("nifti: SetQform: column %d of the matrix has length %v", j, size[j])
		}
	}
	r := mat.NewDense(3, 3, nil)
	for j := range 3 {
		for i := range 3 {
			r.Set(i, j, cols[j][i]/size[j])
		}
	}
	qfac := 1.0
	if mat.Det(r) < 0 {
		qfac = -1
		for i := range 3 {
			r.Set(i, 2, -r.At(i, 2))
		}
	}
	// Nearest rotation: U·Vᵀ from the SVD r = U·Σ·Vᵀ.
	var svd mat.SVD
	if !svd.Factorize(r, mat.SVDFull) {
		return fmt.Errorf("nifti: SetQform: SVD of the rotation part failed")
	}
	if svd.Values(nil)[2] < 1e-12 {
		return fmt.Errorf("nifti: SetQform: the matrix is singular")
	}
	var u, v, rot mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	rot.Mul(&u, v.T())
	_, b, c, d := quaternion(&rot)
	h.QuaternB, h.QuaternC, h.QuaternD = b, c, d
	h.QoffsetX, h.QoffsetY, h.QoffsetZ = m[0][3], m[1][3], m[2][3]
	h.Pixdim[0] = qfac
	h.Pixdim[1], h.Pixdim[2], h.Pixdim[3] = size[0], size[1], size[2]
	h.QformCode = code
	return nil
}

// quaternion returns the unit quaternion (a, b, c, d), a ≥ 0, of a proper
// rotation matrix, computed from the largest of the four diagonal
// combinations for accuracy (Shepperd's method).
func quaternion(r mat.Matrix) (a, b, c, d float64) {
	r11, r12, r13 := r.At(0, 0), r.At(0, 1), r.At(0, 2)
	r21, r22, r23 := r.At(1, 0), r.At(1, 1), r.At(1, 2)
	r31, r32, r33 := r.At(2, 0), r.At(2, 1), r.At(2, 2)
	tr := r11 + r22 + r33
	switch {
	case tr >= r11 && tr >= r22 && tr >= r33:
		s := 2 * math.Sqrt(1+tr) // s = 4a
		a, b, c, d = s/4, (r32-r23)/s, (r13-r31)/s, (r21-r12)/s
	case r11 >= r22 && r11 >= r33:
		s := 2 * math.Sqrt(1+r11-r22-r33) // s = 4b
		a, b, c, d = (r32-r23)/s, s/4, (r12+r21)/s, (r13+r31)/s
	case r22 >= r33:
		s := 2 * math.Sqrt(1+r22-r11-r33) // s = 4c
		a, b, c, d = (r13-r31)/s, (r12+r21)/s, s/4, (r23+r32)/s
	default:
		s := 2 * math.Sqrt(1+r33-r11-r22) // s = 4d
		a, b, c, d = (r21-r12)/s, (r13+r31)/s, (r23+r32)/s, s/4
	}
	if a < 0 {
		a, b, c, d = -a, -b, -c, -d
	}
	return a, b, c, d
}

// GridTolerance is the largest difference, as a fraction of the smallest
// voxel size, that SameGrid accepts between two voxel-to-world matrices:
// far above the rounding of float32 header fields (about 10⁻⁵ mm over a
// 250 mm field of view), far below any real misregistration.
const GridTolerance = 0.01

// SameGrid returns nil when o describes the same spatial grid as h: the
// same matrix size nx×ny×nz and voxel-to-world matrices (VoxelToWorld,
// and also the sforms and the qforms where both headers set them) that
// agree entry by entry within GridTolerance voxels. Otherwise the error
// says what differs; callers add the file names.
func (h *Header) SameGrid(o *Header) error {
	if h.Dim[1] != o.Dim[1] || h.Dim[2] != o.Dim[2] || h.Dim[3] != o.Dim[3] {
		return fmt.Errorf("matrix %d×%d×%d, want %d×%d×%d", o.Dim[1], o.Dim[2], o.Dim[3], h.Dim[1], h.Dim[2], h.Dim[3])
	}
	vox := math.Min(positiveOr1(h.Pixdim[1]), math.Min(positiveOr1(h.Pixdim[2]), positiveOr1(h.Pixdim[3])))
	tol := GridTolerance * vox
	type pair struct {
		name string
		a, b Mat4
	}
	pairs := []pair{{"voxel-to-world matrix", h.VoxelToWorld(), o.VoxelToWorld()}}
	if h.SformCode > 0 && o.SformCode > 0 {
		pairs = append(pairs, pair{"sform", h.SformMatrix(), o.SformMatrix()})
	}
	if h.QformCode > 0 && o.QformCode > 0 {
		pairs = append(pairs, pair{"qform", h.QformMatrix(), o.QformMatrix()})
	}
	for _, p := range pairs {
		for r := range 3 {
			for c := range 4 {
				if d := math.Abs(p.a[r][c] - p.b[r][c]); !(d <= tol) {
					return fmt.Errorf("%s differs from the reference by %.3g mm in row %d, column %d (tolerance %.3g mm): voxel sizes %v×%v×%v mm, want %v×%v×%v, origin (%.4g, %.4g, %.4g), want (%.4g, %.4g, %.4g)",
						p.name, d, r+1, c+1, tol, o.Pixdim[1], o.Pixdim[2], o.Pixdim[3], h.Pixdim[1], h.Pixdim[2], h.Pixdim[3],
						p.b[0][3], p.b[1][3], p.b[2][3], p.a[0][3], p.a[1][3], p.a[2][3])
				}
			}
		}
	}
	return nil
}
