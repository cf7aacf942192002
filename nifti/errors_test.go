package nifti

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// validImage is a small well-formed int16 image for the error tests.
func validImage(version int) testImage {
	vals := make([]float64, 24)
	for i := range vals {
		vals[i] = float64(i * 3)
	}
	return testImage{version: version, order: binary.LittleEndian, dt: int16(Int16), dims: []int64{2, 3, 4},
		pixdim: [8]float64{1, 2, 2, 2, 1, 1, 1, 1}, slope: 1, data: rawValues(int16(Int16), binary.LittleEndian, vals)}
}

// TestReadErrors checks that each kind of damaged or unsupported file is
// rejected with the right error class and a message naming the file and
// the problem.
func TestReadErrors(t *testing.T) {
	mod := func(version int, f func(*testImage)) []byte {
		ti := validImage(version)
		f(&ti)
		return buildImage(ti)
	}
	good1, good2 := buildImage(validImage(1)), buildImage(validImage(2))
	gz := gzipBytes(t, good1)
	badCRC := append([]byte(nil), gz...)
	badCRC[len(badCRC)-8] ^= 0xff
	badCM := append([]byte(nil), gz...)
	badCM[2] = 7

	cases := []struct {
		name    string
		file    string
		data    []byte
		class   error
		message string
	}{
		{"empty", "a.nii", nil, ErrTruncated, "header has 0 of at least 348 bytes"},
		{"truncated header v1", "a.nii", good1[:200], ErrTruncated, "header has 200 of 348 bytes"},
		{"truncated header v2", "a.nii", good2[:400], ErrTruncated, "header has 400 of 540 bytes"},
		{"truncated data", "a.nii", good1[:len(good1)-10], ErrTruncated, "header declares 48 bytes at offset 352"},
		{"truncated data v2", "a.nii", good2[:len(good2)-1], ErrTruncated, "header declares 48 bytes at offset 544"},
		{"truncated data in gzip", "a.nii.gz", gzipBytes(t, good1[:len(good1)-2]), ErrTruncated, "data: 46 of 48 bytes"},
		{"truncated gzip stream", "a.nii.gz", gz[:len(gz)/2], ErrTruncated, "compressed stream ends early"},
		{"gzip checksum", "a.nii.gz", badCRC, ErrCorrupt, "checksum"},
		{"gzip header", "a.nii.gz", badCM, ErrCorrupt, "gzip: invalid header"},
		{"not nifti", "a.nii", []byte("hello, this is not an image at all"), ErrNotNIfTI, "sizeof_hdr is"},
		{"analyze magic", "a.nii", mod(1, func(ti *testImage) { ti.magic = "\x00\x00\x00\x00" }), ErrNotNIfTI, "ANALYZE"},
		{"hdr/img pair", "a.nii", mod(1, func(ti *testImage) { ti.magic = "ni1\x00" }), ErrUnsupported, ".hdr/.img"},
		{"v2 text-mode damage", "a.nii", mod(2, func(ti *testImage) { ti.magic = "n+2\x00\n\x1a\n\x00" }), ErrInvalid, "text-mode"},
		{"dim0 zero", "a.nii", mod(1, func(ti *testImage) { ti.dims = nil }), ErrInvalid, "dim[0] = 0, want 1..7"},
		{"dim0 eight", "a.nii", mod(2, func(ti *testImage) { ti.dims = []int64{1, 1, 1, 1, 1, 1, 1, 1} }), ErrInvalid, "dim[0] = 8"},
		{"dim zero", "a.nii", mod(1, func(ti *testImage) { ti.dims = []int64{2, 0, 4} }), ErrInvalid, "dim[2] = 0"},
		{"dim negative", "a.nii", mod(1, func(ti *testImage) { ti.dims = []int64{2, 3, -4} }), ErrInvalid, "dim[3] = -4"},
		{"dims overflow", "a.nii", mod(2, func(ti *testImage) { ti.dims = []int64{1 << 40, 1 << 40} }), ErrInvalid, "more than 2^56 values"},
		{"unknown datatype", "a.nii", mod(1, func(ti *testImage) { ti.dt, ti.bitpix = 99, 16 }), ErrInvalid, "unknown datatype code 99"},
		{"complex", "a.nii", mod(1, func(ti *testImage) { ti.dt, ti.bitpix = 32, 64 }), ErrUnsupported, "COMPLEX64"},
		{"bitpix", "a.nii", mod(1, func(ti *testImage) { ti.bitpix = 8 }), ErrInvalid, "bitpix 8 does not match datatype INT16"},
		{"vox_offset beyond file", "a.nii", mod(1, func(ti *testImage) { ti.voxOffset = 1 << 21 }), ErrInvalid, "vox_offset 2097152 is beyond the end of the file"},
		{"vox_offset v2 beyond file", "a.nii", mod(2, func(ti *testImage) { ti.voxOffset = 1 << 50 }), ErrInvalid, "beyond the end of the file"},
		{"vox_offset too small", "a.nii", mod(1, func(ti *testImage) { ti.voxOffset = 348 }), ErrInvalid, "vox_offset 348"},
		{"vox_offset fractional", "a.nii", mod(1, func(ti *testImage) { ti.voxOffset = 352.5 }), ErrInvalid, "vox_offset 352.5"},
		{"vox_offset v2 small", "a.nii", mod(2, func(ti *testImage) { ti.voxOffset = 540 }), ErrInvalid, "vox_offset 540 is below 544"},
		{"slope inf", "a.nii", mod(1, func(ti *testImage) { ti.slope = math.Inf(1) }), ErrInvalid, "scl_slope is +Inf"},
		{"slope -inf v2", "a.nii", mod(2, func(ti *testImage) { ti.slope = math.Inf(-1) }), ErrInvalid, "scl_slope is -Inf"},
		{"inter inf", "a.nii", mod(1, func(ti *testImage) { ti.slope, ti.inter = 2, math.Inf(1) }), ErrInvalid, "scl_inter is +Inf"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeTemp(t, c.file, c.data)
			_, err := Read(path)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, c.class) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.message) {
				t.Fatalf("error %q, want class %q, the file name and %q", err, c.class, c.message)
			}
		})
	}
}

// TestHugeDimsNoAllocation checks that a tiny file declaring an enormous
// image is rejected before any large allocation, in both containers.
func TestHugeDimsNoAllocation(t *testing.T) {
	ti := validImage(1)
	ti.dims = []int64{32767, 32767, 32767, 1000}
	raw := buildImage(ti)
	ti2 := validImage(2)
	ti2.dims = []int64{1 << 20, 1 << 20, 1 << 15}
	for name, b := range map[string][]byte{"v1.nii": raw, "v1.nii.gz": gzipBytes(t, raw), "v2.nii": buildImage(ti2)} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Decode(name, b)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrTruncated) {
			t.Errorf("%s: error %v, want ErrTruncated", name, err)
		}
		// The reader's own buffers are a few hundred KiB at most.
		if d := after.TotalAlloc - before.TotalAlloc; d > 4<<20 {
			t.Errorf("%s: allocated %d bytes for a %d-byte input", name, d, len(b))
		}
	}
}

// TestExtensions checks that extensions are decoded, that data are read
// from vox_offset whatever the extensions hold (also a malformed chain),
// and that extensions survive a write.
func TestExtensions(t *testing.T) {
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		for _, version := range []int{1, 2} {
			ti := validImage(version)
			ti.order = order
			ti.data = rawValues(int16(Int16), order, fill([]float64{1, -2, 3}, 24))
			ext := make([]byte, 48)
			order.PutUint32(ext[0:], 32) // esize
			order.PutUint32(ext[4:], 6)  // ecode: comment
			copy(ext[8:], "hello, extension")
			order.PutUint32(ext[32:], 16)
			order.PutUint32(ext[36:], 4) // AFNI
			copy(ext[40:], "<AF>")
			ti.ext = ext
			v, err := Decode("ext.nii", buildImage(ti))
			if err != nil {
				t.Fatal(err)
			}
			if len(v.Extensions) != 2 || v.Extensions[0].Code != 6 || !strings.HasPrefix(string(v.Extensions[0].Data), "hello, extension\x00") ||
				len(v.Extensions[0].Data) != 24 || v.Extensions[1].Code != 4 || string(v.Extensions[1].Data) != "<AF>\x00\x00\x00\x00" {
				t.Fatalf("extensions %q", v.Extensions)
			}
			checkData(t, v.Data, toFloat32(fill([]float64{1, -2, 3}, 24)))

			path := filepath.Join(t.TempDir(), "ext.nii")
			if err := Write(path, v); err != nil {
				t.Fatal(err)
			}
			w, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(w.Extensions) != 2 || string(w.Extensions[1].Data) != "<AF>\x00\x00\x00\x00" || w.VoxOffset != v.VoxOffset {
				t.Fatalf("after write: extensions %q, vox_offset %d want %d", w.Extensions, w.VoxOffset, v.VoxOffset)
			}

			// A chain whose esize runs past vox_offset is dropped, the data stay.
			order.PutUint32(ext[32:], 4000)
			v, err = Decode("badext.nii", buildImage(ti))
			if err != nil {
				t.Fatal(err)
			}
			if len(v.Extensions) != 1 {
				t.Fatalf("malformed chain: %d extensions kept, want 1", len(v.Extensions))
			}
			checkData(t, v.Data, toFloat32(fill([]float64{1, -2, 3}, 24)))
		}
	}
}

func toFloat32(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

// TestAtomicWrite checks that a failing write leaves neither a partial
// file nor a temporary file, and does not disturb an existing file.
func TestAtomicWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "map.nii.gz")
	v, err := New(Uint8, 4, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	for i := range v.Data {
		v.Data[i] = float32(i)
	}
	if err := Write(path, v); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)

	v.Data[10] = 300 // does not fit uint8
	err = Write(path, v)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "offset 10") {
		t.Fatalf("error %v", err)
	}
	after, _ := os.ReadFile(path)
	if string(before) != string(after) {
		t.Fatal("failed write changed the existing file")
	}
	v.Data = v.Data[:5] // wrong length
	if err := Write(filepath.Join(dir, "short.nii"), v); !errors.Is(err, ErrInvalid) {
		t.Fatalf("short data: %v", err)
	}
	if err := Write(filepath.Join(dir, "missing", "x.nii"), v); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "map.nii.gz" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %v, want only map.nii.gz", names)
	}
}

// TestWriteVersion checks the header version choice.
func TestWriteVersion(t *testing.T) {
	v, err := New(Uint8, 40000, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "wide.nii")
	if err := Write(path, v); err != nil {
		t.Fatal(err)
	}
	h, err := ReadHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != 2 || h.Dim[1] != 40000 {
		t.Fatalf("40000-wide image written as version %d, dim %v", h.Version, h.Dim)
	}
	v.Version = 1
	if err := Write(path, v); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "dim[1] = 40000") {
		t.Fatalf("forcing NIfTI-1: %v", err)
	}
}
