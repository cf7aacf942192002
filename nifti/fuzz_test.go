package nifti

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseHeader feeds arbitrary bytes to ParseHeader and Decode. Neither
// may panic; whatever they accept must be self-consistent, and Decode may
// only succeed on an uncompressed input that really holds the data it
// declares, which is what keeps its allocations bounded by the input size.
//
// Seeds: the headers (plus some data) of every real scan in the shared
// data, decompressed, one whole small scan raw and gzipped, and
// hand-built NIfTI-1/NIfTI-2 files in both byte orders.
//
//	go test -run XXX -fuzz FuzzParseHeader -fuzztime 60s ./nifti
func FuzzParseHeader(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(dataDir, "*", "*.nii*"))
	for _, p := range files {
		raw := gunzipFile(f, p)
		f.Add(raw[:min(len(raw), 352+256)])
	}
	if b, err := os.ReadFile(filepath.Join(dataDir, "dipy-small/small_25.nii.gz")); err == nil {
		f.Add(b)
		f.Add(gunzipFile(f, filepath.Join(dataDir, "dipy-small/small_25.nii.gz")))
	}
	for _, version := range []int{1, 2} {
		for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			ti := validImage(version)
			ti.order = order
			ti.ext = make([]byte, 32)
			order.PutUint32(ti.ext, 32)
			order.PutUint32(ti.ext[4:], 6)
			img := buildImage(ti)
			f.Add(img)
			f.Add(gzipBytes(f, img))
		}
	}

	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := ParseHeader(b); err == nil {
			checkHeaderInvariants(t, h)
		}
		v, err := Decode("fuzz.nii", b)
		if err != nil {
			return
		}
		checkHeaderInvariants(t, &v.Header)
		if len(v.Data) != v.Len() {
			t.Fatalf("%d values for dims %v", len(v.Data), v.Dim)
		}
		gz := len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b
		if need := v.VoxOffset + v.dataBytes(); !gz && need > int64(len(b)) {
			t.Fatalf("accepted %d bytes declaring %d", len(b), need)
		}
	})
}

func checkHeaderInvariants(t *testing.T, h *Header) {
	t.Helper()
	if h.Dim[0] < 1 || h.Dim[0] > 7 {
		t.Fatalf("accepted dim[0] = %d", h.Dim[0])
	}
	for i := 1; i < 8; i++ {
		if h.Dim[i] < 1 {
			t.Fatalf("accepted dim %v", h.Dim)
		}
	}
	if !h.Datatype.Supported() || (h.Version != 1 && h.Version != 2) {
		t.Fatalf("accepted datatype %v version %d", h.Datatype, h.Version)
	}
	if (h.Version == 1 && h.VoxOffset < minOffsetV1) || (h.Version == 2 && h.VoxOffset < minOffsetV2) {
		t.Fatalf("accepted vox_offset %d", h.VoxOffset)
	}
	// The transforms are total functions of any accepted header.
	_ = h.VoxelToWorld()
	_ = h.FSLFlipX()
}
