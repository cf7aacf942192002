package nifti

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"
)

// typeValues are test values for each datatype: the type's extremes and a
// few interior points, all exactly representable in float32 so that the
// round trip through Volume.Data can be required to be bit-exact.
var typeValues = map[Datatype][]float64{
	Uint8:   {0, 1, 127, 128, 254, 255, 42},
	Int8:    {-128, -1, 0, 1, 127, -77},
	Int16:   {-32768, -1, 0, 1, 32767, 12345, -2222},
	Uint16:  {0, 1, 32768, 65535, 40000},
	Int32:   {-2147483648, -16777216, -1, 0, 1, 16777216, 2147483520},
	Uint32:  {0, 1, 16777216, 4294967040, 123456},
	Int64:   {-(1 << 62), -1, 0, 1, 1 << 40, 1 << 62},
	Uint64:  {0, 1, 1 << 40, 1 << 63, 7},
	Float32: {0, math.Copysign(0, -1), 1.5, float64(float32(-3.25e-5)), float64(float32(3.4e38)), float64(math.SmallestNonzeroFloat32), quietNaN, math.Inf(1), math.Inf(-1)},
	Float64: {0, math.Copysign(0, -1), 1.5, float64(float32(-3.25e-5)), float64(float32(3.4e38)), float64(math.SmallestNonzeroFloat32), quietNaN, math.Inf(1), math.Inf(-1)},
}

// quietNaN is the NaN whose bits survive float64 → float32 → float64
// (math.NaN() carries a payload bit that float32 cannot hold).
var quietNaN = math.Float64frombits(0x7ff8000000000000)

var allTypes = []Datatype{Uint8, Int8, Int16, Uint16, Int32, Uint32, Int64, Uint64, Float32, Float64}

// fill repeats vals to length n.
func fill(vals []float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = vals[(i*5+i/7)%len(vals)]
	}
	return out
}

func sameBits(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

// geometryImage returns a test image with an oblique qform and sform whose
// values are exact in float32, so NIfTI-1 stores them without rounding.
func geometryImage(version int, order binary.ByteOrder, dt Datatype, dims []int64, vals []float64) testImage {
	return testImage{
		version: version, order: order, dt: int16(dt), dims: dims,
		pixdim: [8]float64{-1, 2.5, 2.25, 3, 1.5, 1, 1, 1},
		slope:  1,
		qcode:  1, scode: 2,
		quat:    [3]float64{0.25, -0.5, 0.125},
		qoff:    [3]float64{-90.5, 12.25, 30},
		srow:    [3][4]float64{{-2.5, 0.125, 0, 90}, {0, 2.25, -0.5, -126}, {0.25, 0, 3, -72}},
		units:   uint8(UnitsMM) | uint8(UnitsSec),
		descrip: "prism test image",
		data:    rawValues(int16(dt), order, vals),
	}
}

// TestRoundTrip reads files built independently for every datatype, both
// header versions, both byte orders and both containers, checks every
// value bit for bit, writes them back with Write (.nii and .nii.gz),
// checks that the written data section equals the independent
// little-endian encoding byte for byte, and reads the written file back.
func TestRoundTrip(t *testing.T) {
	dims := []int64{3, 2, 2, 4}
	n := 48
	orders := []binary.ByteOrder{binary.LittleEndian, binary.BigEndian}
	for _, dt := range allTypes {
		vals := fill(typeValues[dt], n)
		want := make([]float32, n)
		for i, v := range vals {
			want[i] = float32(v)
		}
		leData := rawValues(int16(dt), binary.LittleEndian, vals)
		for _, version := range []int{1, 2} {
			for _, order := range orders {
				for _, gz := range []bool{false, true} {
					name := fmt.Sprintf("%v_v%d_%v_gz%v", dt, version, order, gz)
					t.Run(name, func(t *testing.T) {
						img := buildImage(geometryImage(version, order, dt, dims, vals))
						file := "in.nii"
						if gz {
							img, file = gzipBytes(t, img), "in.nii.gz"
						}
						v, err := Read(writeTemp(t, file, img))
						if err != nil {
							t.Fatal(err)
						}
						if v.Version != version || v.ByteOrder != order || v.Datatype != dt {
							t.Fatalf("version %d order %v datatype %v", v.Version, v.ByteOrder, v.Datatype)
						}
						checkData(t, v.Data, want)
						checkGeometry(t, &v.Header)

						for _, out := range []string{"out.nii", "out.nii.gz"} {
							path := filepath.Join(t.TempDir(), out)
							if err := Write(path, v); err != nil {
								t.Fatal(err)
							}
							raw := gunzipFile(t, path)
							hdrSize := 352
							if version == 2 {
								hdrSize = 544
							}
							if binary.LittleEndian.Uint32(raw) != uint32(hdrSize-4) {
								t.Fatalf("%s: sizeof_hdr %d, want version %d little-endian", out, binary.LittleEndian.Uint32(raw), version)
							}
							if len(raw) != hdrSize+len(leData) || !bytes.Equal(raw[hdrSize:], leData) {
								t.Fatalf("%s: data section differs from the independent encoding", out)
							}
							w, err := Read(path)
							if err != nil {
								t.Fatal(err)
							}
							checkData(t, w.Data, want)
							checkGeometry(t, &w.Header)
							if w.Descrip != "prism test image" || w.XYZTUnits != v.XYZTUnits || w.VoxOffset != int64(hdrSize) {
								t.Fatalf("%s: descrip %q units %d vox_offset %d", out, w.Descrip, w.XYZTUnits, w.VoxOffset)
							}
						}
					})
				}
			}
		}
	}
}

func checkData(t *testing.T, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for i := range got {
		if !sameBits(got[i], want[i]) {
			t.Fatalf("value %d = %v (bits %#x), want %v (bits %#x)", i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// checkGeometry compares the header with geometryImage's fields.
func checkGeometry(t *testing.T, h *Header) {
	t.Helper()
	if h.Dim != [8]int64{4, 3, 2, 2, 4, 1, 1, 1} {
		t.Fatalf("dim %v", h.Dim)
	}
	if h.Pixdim != [8]float64{-1, 2.5, 2.25, 3, 1.5, 1, 1, 1} {
		t.Fatalf("pixdim %v", h.Pixdim)
	}
	if h.QformCode != 1 || h.SformCode != 2 {
		t.Fatalf("codes %d %d", h.QformCode, h.SformCode)
	}
	if h.QuaternB != 0.25 || h.QuaternC != -0.5 || h.QuaternD != 0.125 || h.QoffsetX != -90.5 || h.QoffsetY != 12.25 || h.QoffsetZ != 30 {
		t.Fatalf("quaternion %v %v %v offsets %v %v %v", h.QuaternB, h.QuaternC, h.QuaternD, h.QoffsetX, h.QoffsetY, h.QoffsetZ)
	}
	if h.Srow != [3][4]float64{{-2.5, 0.125, 0, 90}, {0, 2.25, -0.5, -126}, {0.25, 0, 3, -72}} {
		t.Fatalf("srow %v", h.Srow)
	}
	if h.SpatialUnits() != UnitsMM || h.TimeUnits() != UnitsSec {
		t.Fatalf("units %v %v", h.SpatialUnits(), h.TimeUnits())
	}
}

// TestScaling checks that scl_slope/scl_inter are applied on read exactly
// as real = slope·stored + inter (the expected values are exact in
// float32), that slope 0 and NaN mean "no scaling", and that writing with
// the same header restores the stored integers byte for byte.
func TestScaling(t *testing.T) {
	raw := []float64{-3, 0, 7, 32767, -32768, 100}
	cases := []struct {
		name         string
		slope, inter float64
		want         func(x float64) float64
	}{
		{"slope2.5_inter-10", 2.5, -10, func(x float64) float64 { return 2.5*x - 10 }},
		{"slope-0.5", -0.5, 0, func(x float64) float64 { return -0.5*x + 0 }}, // +0 turns -0 into 0, as in the reader
		{"inter_only_slope1", 1, 1000, func(x float64) float64 { return x + 1000 }},
		{"slope0_means_none", 0, 5, func(x float64) float64 { return x }},
		{"slopeNaN_means_none", math.NaN(), 5, func(x float64) float64 { return x }},
	}
	for _, version := range []int{1, 2} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("v%d_%s", version, c.name), func(t *testing.T) {
				ti := testImage{version: version, order: binary.LittleEndian, dt: int16(Int16), dims: []int64{6},
					pixdim: [8]float64{1, 1, 1, 1, 1, 1, 1, 1}, slope: c.slope, inter: c.inter,
					data: rawValues(int16(Int16), binary.LittleEndian, raw)}
				img := buildImage(ti)
				v, err := Decode("scaled.nii", img)
				if err != nil {
					t.Fatal(err)
				}
				for i, x := range raw {
					if w := float32(c.want(x)); !sameBits(v.Data[i], w) {
						t.Fatalf("value %d = %v, want %v", i, v.Data[i], w)
					}
				}
				var buf bytes.Buffer
				if err := Encode(&buf, v); err != nil {
					t.Fatal(err)
				}
				hs := 352
				if version == 2 {
					hs = 544
				}
				if !bytes.Equal(buf.Bytes()[hs:], ti.data) {
					t.Fatalf("stored integers changed on write")
				}
			})
		}
	}

	// Every uint8 code under the common 1/255 slope survives a round trip.
	codes := make([]float64, 256)
	for i := range codes {
		codes[i] = float64(i)
	}
	ti := testImage{version: 1, order: binary.LittleEndian, dt: int16(Uint8), dims: []int64{256},
		slope: 1.0 / 255, data: rawValues(int16(Uint8), binary.LittleEndian, codes)}
	v, err := Decode("u8.nii", buildImage(ti))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Encode(&buf, v); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes()[352:], ti.data) {
		t.Fatal("uint8 codes with slope 1/255 changed on write")
	}
}

// TestWriteIntegerRange checks rounding to nearest and the refusal of
// values an integer type cannot hold.
func TestWriteIntegerRange(t *testing.T) {
	v, err := New(Int16, 4)
	if err != nil {
		t.Fatal(err)
	}
	copy(v.Data, []float32{1.4, 1.6, -2.5, 32767.4})
	var buf bytes.Buffer
	if err := Encode(&buf, v); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.Bytes()[352:], rawValues(int16(Int16), binary.LittleEndian, []float64{1, 2, -3, 32767}); !bytes.Equal(got, want) {
		t.Fatalf("rounded data % x, want % x", got, want)
	}
	for _, bad := range []float32{32767.6, -32768.6, float32(math.NaN()), float32(math.Inf(1))} {
		v.Data[2] = bad
		err := Encode(&bytes.Buffer{}, v)
		if err == nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("value %v stored as int16: err %v", bad, err)
		}
	}
}
