package nifti

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// dataDir holds the shared real scans (see their README.md files).
const dataDir = "../../shared/data/dmri"

// realScans lists every NIfTI file in dataDir with values from the
// datasets' READMEs (shape, datatype, voxel size, transform codes, mask
// voxel counts) and, where the READMEs give none, from an independent
// reader: the value sum and probe values were computed with nibabel 5.0
// (np.sum(dataobj, dtype=float64)), the determinant sign from its affine.
var realScans = []struct {
	path         string
	dims         []int64
	dt           Datatype
	voxel        float64
	qcode, scode XformCode
	sum          float64
	probe        []float32 // see probeValues
	min, max     float32
	flipX        bool
	units        uint8 // xyzt_units
}{
	{"dipy-small/small_64D.nii", []int64{10, 10, 10, 65}, Int16, 2, 1, 1, 5967027, []float32{140, 104, 76, 87}, 0, 1675, false, 0},
	{"dipy-small/small_101D.nii.gz", []int64{6, 10, 10, 102}, Uint16, 2.5, 1, 1, 4809847, []float32{264, 197, 192, 65}, 0, 1004, false, 0},
	{"dipy-small/small_25.nii.gz", []int64{10, 8, 2, 26}, Uint8, 2, 0, 2, 319644, []float32{230, 71, 77, 67}, 14, 255, true, 0},
	{"mrtrix3-b3000-roi/dwi.nii.gz", []int64{6, 8, 9, 68}, Uint16, 2.5, 1, 1, 1630389, []float32{274, 264, 42, 58}, 0, 1046, true, 10},
	{"mrtrix3-msmt-slab/dwi.nii.gz", []int64{15, 15, 11, 102}, Float32, 2.5, 1, 1, 90386357.14906092, []float32{1033.263427734375, 1030.291015625, 605.6603393554688, 1104.3447265625}, -70.75895, 4857.182, true, 10},
	{"mrtrix3-msmt-slab/mask.nii.gz", []int64{15, 15, 11}, Uint8, 2.5, 1, 1, 2218, []float32{1, 1, 1, 1}, 0, 1, true, 10},
	{"xa30-prisma-b2500-wholebrain/dwi_PA.nii.gz", []int64{72, 72, 39, 21}, Int16, 3, 1, 1, 154624932, []float32{265, 154, 13, 29}, 0, 2866, false, 10},
	{"xa30-prisma-b2500-wholebrain/dwi_AP.nii.gz", []int64{72, 72, 39, 21}, Int16, 3, 1, 1, 155820964, []float32{294, 94, 15, 7}, 0, 2797, false, 10},
	{"xa30-prisma-b2500-wholebrain/mask.nii.gz", []int64{72, 72, 39}, Uint8, 3, 1, 1, 48886, []float32{1, 0, 0, 0}, 0, 1, false, 10},
}

func skipWithoutData(t testing.TB) {
	if _, err := os.Stat(dataDir); err != nil {
		t.Skipf("shared data not available: %v", err)
	}
}

// TestRealScans reads every real scan and checks it against the README
// and nibabel values. Sums of integer data are exact in float64; the
// float32 slab's sum may differ from numpy's (pairwise) summation order by
// a few ulps of 9e7, so it is compared to 1e-9 relative.
func TestRealScans(t *testing.T) {
	skipWithoutData(t)
	files, _ := filepath.Glob(filepath.Join(dataDir, "*", "*.nii*"))
	if len(files) != len(realScans) {
		t.Errorf("%d NIfTI files in %s, the table lists %d", len(files), dataDir, len(realScans))
	}
	for _, s := range realScans {
		t.Run(s.path, func(t *testing.T) {
			path := filepath.Join(dataDir, s.path)
			v, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			if v.NDim() != len(s.dims) || v.Datatype != s.dt || v.Version != 1 {
				t.Fatalf("ndim %d datatype %v version %d", v.NDim(), v.Datatype, v.Version)
			}
			for i, d := range s.dims {
				if v.Dim[i+1] != d {
					t.Fatalf("dim %v, want %v", v.Dim, s.dims)
				}
			}
			for i := 1; i <= 3; i++ {
				if v.Pixdim[i] != s.voxel {
					t.Fatalf("pixdim %v, want %v mm voxels", v.Pixdim, s.voxel)
				}
			}
			if v.QformCode != s.qcode || v.SformCode != s.scode || v.XYZTUnits != s.units {
				t.Fatalf("qform %v sform %v units %v", v.QformCode, v.SformCode, v.XYZTUnits)
			}
			sum, lo, hi := 0.0, float32(math.Inf(1)), float32(math.Inf(-1))
			for _, x := range v.Data {
				sum += float64(x)
				lo, hi = min(lo, x), max(hi, x)
			}
			if math.Abs(sum-s.sum) > 1e-9*math.Abs(s.sum) || lo != s.min || hi != s.max {
				t.Fatalf("sum %v min %v max %v, want %v %v %v", sum, lo, hi, s.sum, s.min, s.max)
			}
			if got := probeValues(v); !slices.Equal(got, s.probe) {
				t.Fatalf("probe values %v, want %v", got, s.probe)
			}
			if v.FSLFlipX() != s.flipX {
				t.Fatalf("FSLFlipX %v (det %v)", v.FSLFlipX(), v.Determinant())
			}
			// The qform and sform of these files describe the same grid
			// (small_25 has no qform); they agree to float32 precision of
			// the stored quaternion, 1e-4 mm over these small offsets.
			if s.qcode > 0 {
				q, m := v.QformMatrix(), v.SformMatrix()
				for i := range 3 {
					for j := range 4 {
						if math.Abs(q[i][j]-m[i][j]) > 1e-3 {
							t.Fatalf("qform and sform differ at (%d,%d):\n%v\n%v", i, j, q, m)
						}
					}
				}
			}
			// The gradient table beside each DWI has one entry per volume.
			if bval, err := os.ReadFile(strings.TrimSuffix(strings.TrimSuffix(path, ".gz"), ".nii") + ".bval"); err == nil {
				if n := len(strings.Fields(string(bval))); n != v.NumVolumes() {
					t.Fatalf("%d b-values for %d volumes", n, v.NumVolumes())
				}
			}
		})
	}

	// The whole-brain mask has 48,886 voxels (README) and ReadHeader agrees
	// with Read on the header.
	h, err := ReadHeader(filepath.Join(dataDir, "xa30-prisma-b2500-wholebrain/dwi_PA.nii.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if h.Dim != [8]int64{4, 72, 72, 39, 21, 1, 1, 1} || h.Pixdim[4] != float64(float32(3.516)) || h.TimeUnits() != UnitsSec {
		t.Fatalf("ReadHeader: dim %v pixdim %v units %v", h.Dim, h.Pixdim, h.TimeUnits())
	}
}

// TestRealRoundTrip writes every real scan back in its own datatype (as
// .nii.gz and as NIfTI-2 .nii) and requires identical values and
// transforms on reading.
func TestRealRoundTrip(t *testing.T) {
	skipWithoutData(t)
	for _, s := range realScans {
		if strings.HasSuffix(s.path, "dwi_AP.nii.gz") {
			continue // same layout as dwi_PA; skipped to keep the test fast
		}
		v, err := Read(filepath.Join(dataDir, s.path))
		if err != nil {
			t.Fatal(err)
		}
		for _, out := range []struct {
			name    string
			version int
		}{{"rt.nii.gz", 0}, {"rt2.nii", 2}} {
			v.Version = out.version
			path := filepath.Join(t.TempDir(), out.name)
			if err := Write(path, v); err != nil {
				t.Fatal(err)
			}
			w, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			checkData(t, w.Data, v.Data)
			if w.Dim != v.Dim || w.Pixdim != v.Pixdim || w.VoxelToWorld() != v.VoxelToWorld() || w.QformMatrix() != v.QformMatrix() || w.Descrip != v.Descrip {
				t.Fatalf("%s %s: header changed", s.path, out.name)
			}
		}
	}
}

// probeValues returns values around the centre voxel (c = dims/2): for a
// 4-D image volumes 0, 1, 2 at c and the last volume at c+x̂; for a 3-D
// image c-x̂, c, c+x̂, c+2x̂. nibabel indexes d[x, y, z, t] the same way, so
// these check the axis order, not only the values.
func probeValues(v *Volume) []float32 {
	nx, ny, nz, nt := v.Shape()
	cx, cy, cz := nx/2, ny/2, nz/2
	if v.NDim() == 4 {
		return []float32{v.At(cx, cy, cz, 0), v.At(cx, cy, cz, 1), v.At(cx, cy, cz, 2), v.At(cx+1, cy, cz, nt-1)}
	}
	return []float32{v.At(cx-1, cy, cz, 0), v.At(cx, cy, cz, 0), v.At(cx+1, cy, cz, 0), v.At(cx+2, cy, cz, 0)}
}
