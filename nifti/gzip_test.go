package nifti

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// TestParallelGzip checks that the parallel writer emits exactly one
// standard gzip member that decodes (with CRC and length verified by
// compress/gzip) to the input, at sizes around the chunk boundaries, and
// that splitting costs little compression.
func TestParallelGzip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// Half noise, half a repeating pattern whose repeats cross chunk
	// boundaries, so the 32 KiB dictionaries matter.
	mk := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			if (i/4096)%2 == 0 {
				b[i] = byte(r.Uint32() & 0x0f)
			} else {
				b[i] = byte(i % 251)
			}
		}
		return b
	}
	for _, n := range []int{0, 1, 1<<20 - 1, 1 << 20, 1<<20 + 1, 7 << 19, 9 << 20} {
		data := mk(n)
		var buf bytes.Buffer
		if err := writeGzip(&buf, data, -1); err != nil {
			t.Fatal(err)
		}
		br := bytes.NewReader(buf.Bytes()) // an io.ByteReader: gzip reads no further than it needs
		zr, err := gzip.NewReader(br)
		if err != nil {
			t.Fatal(err)
		}
		zr.Multistream(false)
		got, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("n=%d: decoded %d bytes that differ from the input", n, len(got))
		}
		if br.Len() != 0 {
			t.Fatalf("n=%d: %d bytes follow the first gzip member", n, br.Len())
		}
		seq := gzipBytes(t, data)
		// Each extra chunk costs a sync marker and a fresh Huffman table:
		// allow 1% plus 1 KiB per chunk over the sequential size.
		chunks := n/max(1<<20, (n+15)/16) + 1
		if limit := len(seq) + len(seq)/100 + 1024*chunks; buf.Len() > limit {
			t.Errorf("n=%d: parallel output %d bytes, sequential %d", n, buf.Len(), len(seq))
		}
	}
}

// TestMultiMemberGzip checks that an image split across several
// concatenated gzip members (as written by some parallel compressors) is
// read whole.
func TestMultiMemberGzip(t *testing.T) {
	ti := validImage(1)
	img := buildImage(ti)
	var cat []byte
	for _, part := range [][]byte{img[:100], img[100:370], img[370:]} {
		cat = append(cat, gzipBytes(t, part)...)
	}
	v, err := Decode("multi.nii.gz", cat)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Decode("single.nii", img)
	if err != nil {
		t.Fatal(err)
	}
	checkData(t, v.Data, want.Data)
}

// TestGzipLevels checks WriteLevel and EncodeGzip at the extreme levels
// and their rejection of invalid levels.
func TestGzipLevels(t *testing.T) {
	v, err := Decode("in.nii", buildImage(validImage(1)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, level := range []int{-1, 1, 9} {
		path := filepath.Join(dir, fmt.Sprintf("l%d.nii.gz", level))
		if err := WriteLevel(path, v, level); err != nil {
			t.Fatal(err)
		}
		w, err := Read(path)
		if err != nil {
			t.Fatal(err)
		}
		checkData(t, w.Data, v.Data)
		var buf bytes.Buffer
		if err := EncodeGzip(&buf, v, level); err != nil {
			t.Fatal(err)
		}
		if w, err = Decode("mem.nii.gz", buf.Bytes()); err != nil {
			t.Fatal(err)
		}
		checkData(t, w.Data, v.Data)
	}
	for _, level := range []int{-2, 0, 10} {
		if err := WriteLevel(filepath.Join(dir, "bad.nii.gz"), v, level); err == nil {
			t.Errorf("WriteLevel accepted level %d", level)
		}
		if err := EncodeGzip(io.Discard, v, level); err == nil {
			t.Errorf("EncodeGzip accepted level %d", level)
		}
	}
}

// TestGzipTrailing checks that bytes after the gzip member holding the end
// of the data are ignored (zlib accepts trailing garbage, Python's gzip
// zero padding), while a member cut before its CRC-32 trailer is still an
// error.
func TestGzipTrailing(t *testing.T) {
	img := buildImage(validImage(1))
	gz := gzipBytes(t, img)
	want, err := Decode("plain.nii", img)
	if err != nil {
		t.Fatal(err)
	}
	for name, tail := range map[string][]byte{
		"zeros":        make([]byte, 5),
		"many zeros":   make([]byte, 100),
		"garbage":      []byte("trailing garbage, not gzip"),
		"extra member": gzipBytes(t, []byte("more")),
	} {
		v, err := Decode(name+".nii.gz", append(append([]byte(nil), gz...), tail...))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkData(t, v.Data, want.Data)
	}
	if _, err := Decode("cut.nii.gz", gz[:len(gz)-4]); !errors.Is(err, ErrTruncated) {
		t.Fatalf("member without its length field: %v", err)
	}
}
