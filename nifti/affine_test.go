package nifti

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// near compares matrices entrywise. The tolerance 1e-14 is a few ulps of
// entries of magnitude ≤ 4: the hand-computed cases involve only exact
// values and sqrt(1/2)² = 1/2 up to one rounding.
func near(t *testing.T, name string, got, want Mat4, tol float64) {
	t.Helper()
	for i := range 4 {
		for j := range 4 {
			if math.Abs(got[i][j]-want[i][j]) > tol {
				t.Fatalf("%s: entry (%d,%d) = %v, want %v\ngot  %v\nwant %v", name, i, j, got[i][j], want[i][j], got, want)
			}
		}
	}
}

// TestQformHandComputed checks quaternion → matrix against matrices worked
// out by hand from nifti1.h's definition R·diag(dx, dy, qfac·dz) + offset.
func TestQformHandComputed(t *testing.T) {
	s := math.Sqrt(0.5)
	cases := []struct {
		name    string
		b, c, d float64
		pixdim  [4]float64 // qfac, dx, dy, dz
		off     [3]float64
		want    Mat4
	}{
		{"identity rotation, qfac -1", 0, 0, 0, [4]float64{-1, 2, 3, 4}, [3]float64{10, 20, 30},
			Mat4{{2, 0, 0, 10}, {0, 3, 0, 20}, {0, 0, -4, 30}, {0, 0, 0, 1}}},
		// a = cos 45°, d = sin 45°: +90° about z maps i to +y and j to -x.
		{"90 degrees about z", 0, 0, s, [4]float64{1, 2, 3, 4}, [3]float64{0, 0, 0},
			Mat4{{0, -3, 0, 0}, {2, 0, 0, 0}, {0, 0, 4, 0}, {0, 0, 0, 1}}},
		// b = 1 gives a = 0 (180° about x): y and z change sign.
		{"180 degrees about x", 1, 0, 0, [4]float64{1, 1, 1, 1}, [3]float64{-5, 6, 7},
			Mat4{{1, 0, 0, -5}, {0, -1, 0, 6}, {0, 0, -1, 7}, {0, 0, 0, 1}}},
		// The XA30 scans: 180° about y with qfac -1 is diag(-3, 3, 3), which
		// equals their sform.
		{"xa30 header", 0, 1, 0, [4]float64{-1, 3, 3, 3}, [3]float64{108, -98.279, -23.3962},
			Mat4{{-3, 0, 0, 108}, {0, 3, 0, -98.279}, {0, 0, 3, -23.3962}, {0, 0, 0, 1}}},
		// float32 storage can leave b²+c²+d² a hair above 1: renormalised.
		{"norm slightly above 1", 0, 0, 1.0000001, [4]float64{0, 1, 1, 1}, [3]float64{0, 0, 0},
			Mat4{{-1, 0, 0, 0}, {0, -1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}},
		// Non-positive voxel sizes count as 1, pixdim[0] = 0 as qfac +1.
		{"bad voxel sizes", 0, 0, 0, [4]float64{0, 0, -2, math.NaN()}, [3]float64{0, 0, 0},
			Mat4{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}},
	}
	for _, c := range cases {
		h := Header{QuaternB: c.b, QuaternC: c.c, QuaternD: c.d, QoffsetX: c.off[0], QoffsetY: c.off[1], QoffsetZ: c.off[2]}
		copy(h.Pixdim[:4], c.pixdim[:])
		near(t, c.name, h.QformMatrix(), c.want, 1e-14)
	}
}

// TestTransformChoice checks VoxelToWorld's precedence, Determinant and
// FSL's left-right rule, including FSL's radiological default when neither
// transform is set.
func TestTransformChoice(t *testing.T) {
	diag := func(a, b, c float64) [3][4]float64 { return [3][4]float64{{a, 0, 0, 1}, {0, b, 0, 2}, {0, 0, c, 3}} }
	cases := []struct {
		name         string
		qcode, scode XformCode
		qfac         float64
		srow         [3][4]float64
		wantDet      float64
		wantFlip     bool
	}{
		{"sform wins over qform", 1, 1, -1, diag(2, 2, 2), 8, true},
		{"radiological sform", 1, 4, 1, diag(-2, 2, 2), -8, false},
		{"qform only, qfac -1", 1, 0, -1, diag(2, 2, 2), -8, false},
		{"qform only, qfac +1", 1, 0, 1, diag(-2, 2, 2), 8, true},
		{"neither: pixdim scaling, FSL assumes radiological", 0, 0, 1, diag(-2, 2, 2), 8, false},
	}
	for _, c := range cases {
		h := Header{QformCode: c.qcode, SformCode: c.scode, Srow: c.srow}
		h.Pixdim = [8]float64{c.qfac, 2, 2, 2, 1, 1, 1, 1}
		if d := h.Determinant(); math.Abs(d-c.wantDet) > 1e-12 {
			t.Errorf("%s: determinant %v, want %v", c.name, d, c.wantDet)
		}
		if f := h.FSLFlipX(); f != c.wantFlip {
			t.Errorf("%s: FSLFlipX %v, want %v", c.name, f, c.wantFlip)
		}
	}
	h := Header{SformCode: 2, Srow: diag(-2, 3, 4)}
	x, y, z := func() (float64, float64, float64) { m := h.VoxelToWorld(); return m.Apply(1, 1, 1) }()
	if x != -1 || y != 5 || z != 7 {
		t.Errorf("Apply(1,1,1) = %v %v %v, want -1 5 7", x, y, z)
	}
}

// randomRotation returns a uniformly random rotation matrix and its
// quaternion (a ≥ 0) from a normalised 4-D Gaussian vector.
func randomRotation(r *rand.Rand) (rot [3][3]float64, q [4]float64) {
	var n float64
	for i := range q {
		q[i] = r.NormFloat64()
		n += q[i] * q[i]
	}
	n = math.Sqrt(n)
	if q[0] < 0 {
		n = -n
	}
	for i := range q {
		q[i] /= n
	}
	a, b, c, d := q[0], q[1], q[2], q[3]
	rot = [3][3]float64{
		{a*a + b*b - c*c - d*d, 2 * (b*c - a*d), 2 * (b*d + a*c)},
		{2 * (b*c + a*d), a*a + c*c - b*b - d*d, 2 * (c*d - a*b)},
		{2 * (b*d - a*c), 2 * (c*d + a*b), a*a + d*d - c*c - b*b},
	}
	return rot, q
}

// TestSetQform checks that SetQform inverts QformMatrix for rotations of
// either handedness, and projects a sheared matrix onto a rotation.
func TestSetQform(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for trial := range 200 {
		rot, q := randomRotation(r)
		size := [3]float64{0.5 + 2.5*r.Float64(), 0.5 + 2.5*r.Float64(), 0.5 + 2.5*r.Float64()}
		qfac := 1.0
		if trial%2 == 1 {
			qfac = -1
		}
		var m Mat4
		for i := range 3 {
			for j := range 3 {
				s := size[j]
				if j == 2 {
					s *= qfac
				}
				m[i][j] = rot[i][j] * s
			}
			m[i][3] = 200*r.Float64() - 100
		}
		m[3][3] = 1
		var h Header
		if err := h.SetQform(m, XformScannerAnat); err != nil {
			t.Fatal(err)
		}
		// Double-precision arithmetic on entries ≤ 100: 1e-12 is ~100 ulps.
		near(t, "SetQform round trip", h.QformMatrix(), m, 1e-12)
		if h.Qfac() != qfac || h.QformCode != XformScannerAnat {
			t.Fatalf("qfac %v code %v", h.Qfac(), h.QformCode)
		}
		if math.Abs(h.QuaternB-q[1])+math.Abs(h.QuaternC-q[2])+math.Abs(h.QuaternD-q[3]) > 1e-12 {
			t.Fatalf("quaternion %v %v %v, want %v", h.QuaternB, h.QuaternC, h.QuaternD, q[1:])
		}
	}

	// Shear: the result is a rotation with the original column lengths.
	m := Mat4{{2, 0.3, 0, 0}, {0, 2, 0, 0}, {0, 0, 2, 0}, {0, 0, 0, 1}}
	var h Header
	if err := h.SetQform(m, 1); err != nil {
		t.Fatal(err)
	}
	q := h.QformMatrix()
	for a := range 3 {
		for b := a + 1; b < 3; b++ {
			dot := q[0][a]*q[0][b] + q[1][a]*q[1][b] + q[2][a]*q[2][b]
			if math.Abs(dot) > 1e-12 {
				t.Fatalf("columns %d and %d not orthogonal: %v", a, b, dot)
			}
		}
	}
	if math.Abs(h.Pixdim[2]-math.Hypot(0.3, 2)) > 1e-15 {
		t.Fatalf("voxel size %v, want %v", h.Pixdim[2], math.Hypot(0.3, 2))
	}
	if err := h.SetQform(Mat4{{1, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}, 1); err == nil {
		t.Fatal("singular matrix accepted")
	}
}

func TestSameGrid(t *testing.T) {
	ref, err := New(Float32, 10, 12, 8)
	if err != nil {
		t.Fatal(err)
	}
	ref.Pixdim[1], ref.Pixdim[2], ref.Pixdim[3] = 2, 2, 2
	ref.SetSform(Mat4{{-2, 0, 0, 90}, {0, 2, 0, -126}, {0, 0, 2, -72}, {0, 0, 0, 1}}, 1)
	if err := ref.SetQform(ref.SformMatrix(), 1); err != nil {
		t.Fatal(err)
	}
	clone := func(edit func(h *Header)) *Header {
		h := ref.Header
		edit(&h)
		return &h
	}
	for _, tc := range []struct {
		name string
		h    *Header
		want string
	}{
		{"identical", clone(func(*Header) {}), ""},
		{"rounding below tolerance", clone(func(h *Header) { h.Srow[0][3] += 1e-4; h.QoffsetX += 1e-4 }), ""},
		{"other matrix", clone(func(h *Header) { h.Dim[3] = 9 }), "matrix 10×12×9, want 10×12×8"},
		{"shifted 50 mm", clone(func(h *Header) { h.Srow[1][3] += 50; h.QoffsetY += 50 }), "by 50 mm in row 2, column 4"},
		{"6 mm voxels", clone(func(h *Header) {
			h.Pixdim[1], h.Pixdim[2], h.Pixdim[3] = 6, 6, 6
			h.Srow[0][0], h.Srow[1][1], h.Srow[2][2] = -6, 6, 6
		}), "voxel sizes 6×6×6 mm, want 2×2×2"},
		{"qform disagrees, sform agrees", clone(func(h *Header) { h.QoffsetZ += 10 }), "qform differs"},
		{"no sform, same qform", clone(func(h *Header) { h.SformCode = 0 }), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ref.SameGrid(tc.h)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
