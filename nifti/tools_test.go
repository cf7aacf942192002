package nifti

import (
	"math"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// toolImages writes images for the external-tool checks: a NIfTI-1 float32
// 4-D .nii.gz, a scaled int16 .nii, a uint8 mask .nii.gz, and a NIfTI-2
// float64 .nii, all on an oblique grid with a positive determinant (so
// MRtrix3 keeps the voxel order and its transform can be compared as is).
func toolImages(t *testing.T) (dir string, vols map[string]*Volume) {
	t.Helper()
	dir = t.TempDir()
	var ref Header
	ref.Dim = [8]int64{3, 5, 4, 3, 1, 1, 1, 1}
	ref.SetUnits(UnitsMM, UnitsUnknown)
	m := Mat4{{2.4963126, 0.10748775, 0.0828965, 4.016227}, {-0.07166575, 2.34026, -0.8763825, -70.183815}, {-0.11528, 0.8727125, 2.33989, -52.152565}, {0, 0, 0, 1}}
	if err := ref.SetQform(m, XformScannerAnat); err != nil {
		t.Fatal(err)
	}
	ref.SetSform(m, XformScannerAnat)
	vols = map[string]*Volume{}
	add := func(name string, dt Datatype, version int, dims []int, f func(i int) float32) {
		v, err := NewLike(&ref, dt, dims...)
		if err != nil {
			t.Fatal(err)
		}
		v.Version = version
		for i := range v.Data {
			v.Data[i] = f(i)
		}
		if dt == Int16 {
			v.SclSlope, v.SclInter = 0.5, -7
		}
		if err := Write(filepath.Join(dir, name), v); err != nil {
			t.Fatal(err)
		}
		vols[name] = v
	}
	add("f32.nii.gz", Float32, 1, []int{5, 4, 3, 7}, func(i int) float32 { return float32(math.Sin(float64(i))) * 1000 })
	add("i16.nii", Int16, 1, nil, func(i int) float32 { return float32(i*37%200)*0.5 - 7 })
	add("mask.nii.gz", Uint8, 1, nil, func(i int) float32 { return float32(i % 2) })
	add("f64v2.nii", Float64, 2, []int{5, 4, 3, 2}, func(i int) float32 { return float32(i) / 3 })
	return dir, vols
}

// TestNiftiTool runs nifti_clib's validator (Debian nifti-bin) on the
// NIfTI-1 outputs; skipped when nifti_tool is absent.
func TestNiftiTool(t *testing.T) {
	tool, err := exec.LookPath("nifti_tool")
	if err != nil {
		t.Skip("nifti_tool not installed (apt-get install nifti-bin)")
	}
	dir, _ := toolImages(t)
	for _, name := range []string{"f32.nii.gz", "i16.nii", "mask.nii.gz"} {
		out, err := exec.Command(tool, "-check_hdr", "-check_nim", "-infiles", filepath.Join(dir, name)).CombinedOutput()
		if err != nil || strings.Count(string(out), "IS GOOD") != 2 {
			t.Errorf("%s: nifti_tool: %v\n%s", name, err, out)
		}
	}
}

// TestMRtrix checks that MRtrix3 reads prism's outputs with the same
// dimensions, voxel sizes, datatype, transform and values: mrinfo reports
// the header, and mrconvert rewrites each image as float64 NIfTI, which
// prism then reads back. Skipped when MRtrix3 is absent.
func TestMRtrix(t *testing.T) {
	if _, err := exec.LookPath("mrinfo"); err != nil {
		t.Skip("MRtrix3 not installed (apt-get install mrtrix3)")
	}
	dir, vols := toolImages(t)
	wantType := map[Datatype]string{Float32: "Float32LE", Int16: "Int16LE", Uint8: "UInt8", Float64: "Float64LE"}
	for name, v := range vols {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			out, err := exec.Command("mrinfo", "-quiet", "-size", "-spacing", "-datatype", "-transform", path).Output()
			if err != nil {
				t.Fatalf("mrinfo: %v", err)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != 7 {
				t.Fatalf("mrinfo output:\n%s", out)
			}
			size, spacing := fields(t, lines[0]), fields(t, lines[1])
			for i := 1; i <= v.NDim(); i++ {
				if size[i-1] != float64(v.Dim[i]) || (i <= 3 && math.Abs(spacing[i-1]-v.Pixdim[i]) > 1e-5) {
					t.Fatalf("mrinfo size %v spacing %v, want dim %v pixdim %v", size, spacing, v.Dim, v.Pixdim)
				}
			}
			if strings.TrimSpace(lines[2]) != wantType[v.Datatype] {
				t.Fatalf("mrinfo datatype %q, want %q", lines[2], wantType[v.Datatype])
			}
			// MRtrix reports the rotation with unit columns: compare with
			// VoxelToWorld's columns divided by the voxel sizes. 1e-5 covers
			// the float32 storage of the NIfTI-1 fields and mrinfo's printing.
			m := v.VoxelToWorld()
			for r := range 3 {
				row := fields(t, lines[3+r])
				for c := range 4 {
					want := m[r][c]
					if c < 3 {
						want /= v.Pixdim[c+1]
					}
					if math.Abs(row[c]-want) > 1e-5*max(1, math.Abs(want)) {
						t.Fatalf("mrinfo transform row %d = %v, want %v", r, row, m[r])
					}
				}
			}
			conv := filepath.Join(t.TempDir(), "mr.nii")
			if out, err := exec.Command("mrconvert", "-quiet", "-datatype", "float64", path, conv).CombinedOutput(); err != nil {
				t.Fatalf("mrconvert: %v\n%s", err, out)
			}
			w, err := Read(conv)
			if err != nil {
				t.Fatal(err)
			}
			checkData(t, w.Data, v.Data)
		})
	}
}

func fields(t *testing.T, line string) []float64 {
	t.Helper()
	var out []float64
	for _, f := range strings.Fields(line) {
		x, err := strconv.ParseFloat(f, 64)
		if err != nil {
			t.Fatalf("parsing %q: %v", line, err)
		}
		out = append(out, x)
	}
	return out
}
