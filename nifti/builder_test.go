package nifti

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// testImage describes a file for buildImage. buildImage lays the header
// out byte by byte from the field offsets of nifti1.h and nifti2.h; it
// shares no code with the package's encoder, so files it builds check the
// reader independently, and comparisons with it check the writer.
type testImage struct {
	version   int              // 1 or 2
	order     binary.ByteOrder // byte order of header and data
	dt        int16
	bitpix    int16 // 0: 8 × element size of dt
	dims      []int64
	pixdim    [8]float64
	voxOffset float64 // 0: header + 4 + len(ext)
	slope     float64
	inter     float64
	qcode     int16
	scode     int16
	quat      [3]float64
	qoff      [3]float64
	srow      [3][4]float64
	units     uint8
	descrip   string
	ext       []byte // bytes after the 4-byte extender; non-empty sets extender[0] = 1
	data      []byte // voxel bytes, already in order
	magic     string // overrides the standard magic
	sizeofHdr int32  // overrides sizeof_hdr
}

func buildImage(ti testImage) []byte {
	hdr := 348
	if ti.version == 2 {
		hdr = 540
	}
	off := ti.voxOffset
	if off == 0 {
		off = float64(hdr + 4 + len(ti.ext))
	}
	bitpix := ti.bitpix
	if bitpix == 0 {
		bitpix = int16(8 * elemSize(ti.dt))
	}
	sizeof := ti.sizeofHdr
	if sizeof == 0 {
		sizeof = int32(hdr)
	}
	// Data start at vox_offset, unless it is absurd (then right after the
	// extensions, for the tests of bad offsets).
	n := hdr + 4 + len(ti.ext)
	if off <= 1<<20 {
		n = max(n, int(off))
	}
	b := make([]byte, n+len(ti.data))
	o := ti.order
	p16 := func(at int, v int16) { o.PutUint16(b[at:], uint16(v)) }
	p32 := func(at int, v int32) { o.PutUint32(b[at:], uint32(v)) }
	p64 := func(at int, v int64) { o.PutUint64(b[at:], uint64(v)) }
	pf32 := func(at int, v float64) { o.PutUint32(b[at:], math.Float32bits(float32(v))) }
	pf64 := func(at int, v float64) { o.PutUint64(b[at:], math.Float64bits(v)) }
	p32(0, sizeof)
	if ti.version == 2 {
		magic := "n+2\x00\r\n\x1a\n"
		if ti.magic != "" {
			magic = ti.magic
		}
		copy(b[4:12], magic)
		p16(12, ti.dt)
		p16(14, bitpix)
		p64(16, int64(len(ti.dims)))
		for i := 1; i < 8; i++ {
			d := int64(1)
			if i <= len(ti.dims) {
				d = ti.dims[i-1]
			}
			p64(16+8*i, d)
		}
		for i := range 8 {
			pf64(104+8*i, ti.pixdim[i])
		}
		p64(168, int64(off))
		pf64(176, ti.slope)
		pf64(184, ti.inter)
		copy(b[240:320], ti.descrip)
		p32(344, int32(ti.qcode))
		p32(348, int32(ti.scode))
		for i := range 3 {
			pf64(352+8*i, ti.quat[i])
			pf64(376+8*i, ti.qoff[i])
		}
		for r := range 3 {
			for c := range 4 {
				pf64(400+32*r+8*c, ti.srow[r][c])
			}
		}
		p32(500, int32(ti.units))
	} else {
		p16(40, int16(len(ti.dims)))
		for i := 1; i < 8; i++ {
			d := int64(1)
			if i <= len(ti.dims) {
				d = ti.dims[i-1]
			}
			p16(40+2*i, int16(d))
		}
		p16(70, ti.dt)
		p16(72, bitpix)
		for i := range 8 {
			pf32(76+4*i, ti.pixdim[i])
		}
		pf32(108, off)
		pf32(112, ti.slope)
		pf32(116, ti.inter)
		b[123] = ti.units
		copy(b[148:228], ti.descrip)
		p16(252, ti.qcode)
		p16(254, ti.scode)
		for i := range 3 {
			pf32(256+4*i, ti.quat[i])
			pf32(268+4*i, ti.qoff[i])
		}
		for r := range 3 {
			for c := range 4 {
				pf32(280+16*r+4*c, ti.srow[r][c])
			}
		}
		magic := "n+1\x00"
		if ti.magic != "" {
			magic = ti.magic
		}
		copy(b[344:348], magic)
	}
	if len(ti.ext) > 0 {
		b[hdr] = 1
		copy(b[hdr+4:], ti.ext)
	}
	copy(b[n:], ti.data)
	return b
}

// elemSize is the byte size of a datatype code, written out for the tests.
func elemSize(dt int16) int {
	switch dt {
	case 2, 256: // uint8, int8
		return 1
	case 4, 512: // int16, uint16
		return 2
	case 8, 768, 16: // int32, uint32, float32
		return 4
	case 1024, 1280, 64: // int64, uint64, float64
		return 8
	case 32: // complex64
		return 8
	}
	return 1
}

// rawValues encodes vals as datatype dt in byte order o.
func rawValues(dt int16, o binary.ByteOrder, vals []float64) []byte {
	es := elemSize(dt)
	b := make([]byte, es*len(vals))
	for i, v := range vals {
		p := b[es*i:]
		switch dt {
		case 2:
			p[0] = uint8(v)
		case 256:
			p[0] = uint8(int8(v))
		case 4:
			o.PutUint16(p, uint16(int16(v)))
		case 512:
			o.PutUint16(p, uint16(v))
		case 8:
			o.PutUint32(p, uint32(int32(v)))
		case 768:
			o.PutUint32(p, uint32(v))
		case 16:
			o.PutUint32(p, math.Float32bits(float32(v)))
		case 1024:
			o.PutUint64(p, uint64(int64(v)))
		case 1280:
			o.PutUint64(p, uint64(v))
		case 64:
			o.PutUint64(p, math.Float64bits(v))
		}
	}
	return b
}

// gzipBytes compresses b with the standard library's sequential writer.
func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeTemp stores b as name in a fresh temporary directory.
func writeTemp(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// gunzipFile returns the decompressed content of a file (or its raw
// content if it is not gzip).
func gunzipFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return b
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
