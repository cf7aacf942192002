package nifti

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// python is the Debian interpreter that has python3-nibabel (the default
// python3 on this machine may be another installation without it).
const python = "/usr/bin/python3"

// nibabelScript has two modes. "read FILE...": load each file with nibabel
// and write FILE.f64 (the scaled data as little-endian float64, x fastest)
// and FILE.json (header facts). "write DIR": make test images with nibabel
// in DIR, with the same .f64 and .json beside each.
const nibabelScript = `
import sys, json, numpy as np, nibabel as nib

def dump(path, img):
    data = np.asanyarray(img.dataobj).astype('<f8')
    data.reshape(-1, order='F').tofile(path + '.f64')
    h = img.header
    slope, inter = h.get_slope_inter()
    info = {
        'shape': [int(s) for s in img.shape],
        'dtype': str(h.get_data_dtype()),
        'zooms': [float(z) for z in h.get_zooms()],
        'qform': img.get_qform().tolist(), 'qcode': int(h['qform_code']),
        'sform': img.get_sform().tolist(), 'scode': int(h['sform_code']),
        'affine': img.affine.tolist(),
        'descrip': h['descrip'].tobytes().rstrip(b'\x00').decode(),
        'version': 2 if isinstance(img, nib.Nifti2Image) else 1,
        'slope': None if slope is None else float(slope),
        'inter': None if inter is None else float(inter),
        'ext': [[int(e.get_code()), e.get_content().decode('latin-1')] for e in h.extensions],
    }
    json.dump(info, open(path + '.json', 'w'))

if sys.argv[1] == 'read':
    for p in sys.argv[2:]:
        dump(p, nib.load(p))
else:
    d = sys.argv[2]
    aff = np.array([[-2.5, 0.125, 0, 90], [0, 2.25, -0.5, -126], [0.25, 0, 3, -72], [0, 0, 0, 1]])
    # 1: big-endian int16 with scaling, qform and sform.
    raw = (np.arange(4*5*3*2).reshape(4, 5, 3, 2) * 37 % 1000 - 400).astype('>i2')
    hdr = nib.Nifti1Header(endianness='>')
    img = nib.Nifti1Image(raw, aff, hdr)
    img.header.set_data_dtype('>i2')
    img.header.set_slope_inter(0.5, 3)
    img.header.set_qform(aff, 1); img.header.set_sform(aff, 4)
    img.header['descrip'] = b'nibabel big-endian'
    p = d + '/be_int16.nii'; nib.save(img, p); dump(p, nib.load(p))
    # 2: NIfTI-2, float64, 4-D, gzip.
    f = np.linspace(-1e3, 1e3, 3*4*5*6).reshape(3, 4, 5, 6) ** 3
    img = nib.Nifti2Image(f, aff)
    img.header.set_data_dtype(np.float64)
    p = d + '/v2_float64.nii.gz'; nib.save(img, p); dump(p, nib.load(p))
    # 3: uint8 mask, sform only, gzip.
    m = (np.arange(6*7*8).reshape(6, 7, 8) % 3 == 0).astype(np.uint8)
    img = nib.Nifti1Image(m, aff)
    img.header.set_qform(None, 0); img.header.set_sform(aff, 2)
    p = d + '/mask_u8.nii.gz'; nib.save(img, p); dump(p, nib.load(p))
    # 4: int32 with a comment extension, and uint16 / float32 plain.
    img = nib.Nifti1Image((np.arange(60).reshape(3, 4, 5) * 1000003 - 30000000).astype(np.int32), aff)
    img.header.extensions.append(nib.nifti1.Nifti1Extension('comment', b'written by nibabel'))
    p = d + '/ext_int32.nii'; nib.save(img, p); dump(p, nib.load(p))
    img = nib.Nifti1Image((np.arange(120).reshape(2, 3, 4, 5) * 541 % 65536).astype(np.uint16), np.diag([1.5, 1.5, 2.0, 1]))
    p = d + '/u16.nii.gz'; nib.save(img, p); dump(p, nib.load(p))
`

type nibabelInfo struct {
	Shape   []int64
	Dtype   string
	Zooms   []float64
	Qform   [4][4]float64
	Qcode   int
	Sform   [4][4]float64
	Scode   int
	Affine  [4][4]float64
	Descrip string
	Version int
	Slope   *float64
	Inter   *float64
	Ext     [][2]any
}

func haveNibabel(t *testing.T) {
	if err := exec.Command(python, "-c", "import nibabel").Run(); err != nil {
		t.Skipf("%s with nibabel not available (apt-get install python3-nibabel): %v", python, err)
	}
}

func runNibabel(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(python, append([]string{"-c", nibabelScript}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("nibabel: %v\n%s", err, out)
	}
}

func loadNibabel(t *testing.T, path string) (nibabelInfo, []float64) {
	t.Helper()
	var info nibabelInfo
	j, err := os.ReadFile(path + ".json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(j, &info); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path + ".f64")
	if err != nil {
		t.Fatal(err)
	}
	data := make([]float64, len(raw)/8)
	for i := range data {
		data[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
	}
	return info, data
}

// compareWithNibabel requires the same shape, voxel sizes, transforms and
// values. Values must agree bit for bit after rounding nibabel's float64
// to float32 (both readers compute slope·x+inter in float64). Matrices are
// compared to 1e-6: both sides compute them in float64 from the same
// float32 header fields, so they differ only by rounding order.
func compareWithNibabel(t *testing.T, v *Volume, info nibabelInfo, data []float64) {
	t.Helper()
	if int(v.Dim[0]) != len(info.Shape) {
		t.Fatalf("ndim %d, nibabel shape %v", v.Dim[0], info.Shape)
	}
	for i, s := range info.Shape {
		if v.Dim[i+1] != s || math.Abs(v.Pixdim[i+1]-info.Zooms[i]) > 1e-12 {
			t.Fatalf("dim %v pixdim %v, nibabel shape %v zooms %v", v.Dim, v.Pixdim, info.Shape, info.Zooms)
		}
	}
	if int(v.QformCode) != info.Qcode || int(v.SformCode) != info.Scode || v.Version != info.Version || v.Descrip != info.Descrip {
		t.Fatalf("codes %d %d version %d descrip %q; nibabel %d %d %d %q", v.QformCode, v.SformCode, v.Version, v.Descrip, info.Qcode, info.Scode, info.Version, info.Descrip)
	}
	closeMat := func(name string, a Mat4, b [4][4]float64) {
		for i := range 4 {
			for j := range 4 {
				if math.Abs(a[i][j]-b[i][j]) > 1e-6 {
					t.Fatalf("%s differs from nibabel:\n%v\n%v", name, a, b)
				}
			}
		}
	}
	if info.Qcode > 0 {
		closeMat("qform", v.QformMatrix(), info.Qform)
	}
	if info.Scode > 0 {
		closeMat("sform", v.SformMatrix(), info.Sform)
	}
	closeMat("voxel-to-world", v.VoxelToWorld(), info.Affine)
	if len(data) != len(v.Data) {
		t.Fatalf("%d values, nibabel %d", len(v.Data), len(data))
	}
	for i, x := range data {
		if !sameBits(v.Data[i], float32(x)) {
			t.Fatalf("value %d = %v, nibabel %v", i, v.Data[i], x)
		}
	}
}

// TestNibabelReadsOurs writes every datatype in both header versions and
// containers, plus a scaled image, and checks that nibabel reads the same
// header and values.
func TestNibabelReadsOurs(t *testing.T) {
	haveNibabel(t)
	dir := t.TempDir()
	var paths []string
	vols := map[string]*Volume{}
	for _, dt := range allTypes {
		for _, version := range []int{1, 2} {
			for _, ext := range []string{".nii", ".nii.gz"} {
				vals := fill(typeValues[dt], 48)
				v, err := Decode("gen.nii", buildImage(geometryImage(version, binary.LittleEndian, dt, []int64{3, 2, 2, 4}, vals)))
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(dir, fmt.Sprintf("%v_v%d%s", dt, version, ext))
				if err := Write(path, v); err != nil {
					t.Fatal(err)
				}
				paths = append(paths, path)
				vols[path] = v
			}
		}
	}
	scaled, err := NewLike(&vols[paths[0]].Header, Int16, 3, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	scaled.SclSlope, scaled.SclInter, scaled.Descrip = 0.25, -100, "scaled by prism"
	for i := range scaled.Data {
		scaled.Data[i] = float32(i)*0.25*37 - 100
	}
	path := filepath.Join(dir, "scaled.nii.gz")
	if err := Write(path, scaled); err != nil {
		t.Fatal(err)
	}
	paths = append(paths, path)
	vols[path] = scaled

	runNibabel(t, append([]string{"read"}, paths...)...)
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			info, data := loadNibabel(t, p)
			// Our own reading of the file we wrote must match too.
			w, err := Read(p)
			if err != nil {
				t.Fatal(err)
			}
			compareWithNibabel(t, w, info, data)
			checkData(t, w.Data, vols[p].Data)
		})
	}
}

// TestWeReadNibabels reads images written by nibabel: big-endian scaled
// int16, NIfTI-2 float64, a uint8 mask with sform only, int32 with an
// extension, and uint16.
func TestWeReadNibabels(t *testing.T) {
	haveNibabel(t)
	dir := t.TempDir()
	runNibabel(t, "write", dir)
	for _, name := range []string{"be_int16.nii", "v2_float64.nii.gz", "mask_u8.nii.gz", "ext_int32.nii", "u16.nii.gz"} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name)
			info, data := loadNibabel(t, p)
			v, err := Read(p)
			if err != nil {
				t.Fatal(err)
			}
			compareWithNibabel(t, v, info, data)
			switch name {
			case "be_int16.nii":
				if v.ByteOrder != binary.BigEndian || v.SclSlope != 0.5 || v.SclInter != 3 {
					t.Fatalf("order %v slope %v inter %v", v.ByteOrder, v.SclSlope, v.SclInter)
				}
			case "ext_int32.nii":
				if len(v.Extensions) != 1 || v.Extensions[0].Code != 6 || string(v.Extensions[0].Data[:18]) != "written by nibabel" {
					t.Fatalf("extensions %q", v.Extensions)
				}
			}
		})
	}
}
