package nifti

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"runtime"
	"strings"
	"sync"

	"github.com/prismsbi/prism/internal/atomicfile"
)

// DefaultGzipLevel is the compress/flate level Write uses for .gz names.
// Level 1 is several times faster than zlib's default 6 with Go's deflate
// and makes files about 15% larger on dMRI series (docs/nifti.md).
const DefaultGzipLevel = flate.BestSpeed

// Write writes v to path atomically: the image goes to a temporary file
// ".<name>.tmp-*" in the same directory, which is synced and renamed over
// path only when complete (then the directory is synced), so path never
// holds a partial image. A name ending in ".gz"
// is gzip-compressed at DefaultGzipLevel, in parallel (see EncodeGzip).
// The header is little-endian NIfTI-1 unless v.Version is 2 or a field
// needs NIfTI-2.
func Write(path string, v *Volume) error {
	return WriteLevel(path, v, DefaultGzipLevel)
}

// WriteLevel is Write with the gzip compression level for .gz names:
// 1 (fastest) to 9 (smallest), or flate.DefaultCompression (-1, meaning 6).
func WriteLevel(path string, v *Volume, level int) error {
	if level < flate.DefaultCompression || level > flate.BestCompression || level == flate.NoCompression {
		return fmt.Errorf("nifti: writing %s: gzip level %d, want 1..9 or -1", path, level)
	}
	gz := strings.HasSuffix(path, ".gz")
	img, err := encode(v)
	if err != nil {
		return fmt.Errorf("nifti: writing %s: %w", path, err)
	}
	err = atomicfile.Write(path, func(w *bufio.Writer) error {
		if gz {
			return writeGzip(w, img, level)
		}
		_, err := w.Write(img)
		return err
	})
	if err != nil {
		return fmt.Errorf("nifti: writing %s: %w", path, err)
	}
	return nil
}

// Encode writes v as an uncompressed single-file NIfTI image (.nii).
func Encode(w io.Writer, v *Volume) error {
	img, err := encode(v)
	if err != nil {
		return fmt.Errorf("nifti: %w", err)
	}
	_, err = w.Write(img)
	return err
}

// EncodeGzip writes v as a gzip-compressed image (.nii.gz) at the given
// compress/flate level (1..9, or -1 for 6). The data are cut into chunks
// that are deflated in parallel on all GOMAXPROCS cores, each primed with
// the 32 KiB preceding it (as pigz does), and joined into one ordinary
// single-member gzip stream.
func EncodeGzip(w io.Writer, v *Volume, level int) error {
	if level < flate.DefaultCompression || level > flate.BestCompression || level == flate.NoCompression {
		return fmt.Errorf("nifti: gzip level %d, want 1..9 or -1", level)
	}
	img, err := encode(v)
	if err != nil {
		return fmt.Errorf("nifti: %w", err)
	}
	return writeGzip(w, img, level)
}

// chooseVersion returns the header version to write for h.
func chooseVersion(h *Header) (int, error) {
	fits := fitsV1(h)
	switch h.Version {
	case 0:
		if fits == "" {
			return 1, nil
		}
		return 2, nil
	case 1:
		if fits != "" {
			return 0, fmt.Errorf("%w: %s does not fit a NIfTI-1 header (set Version 2 or 0)", ErrInvalid, fits)
		}
		return 1, nil
	case 2:
		return 2, nil
	}
	return 0, fmt.Errorf("%w: Version %d, want 0, 1 or 2", ErrInvalid, h.Version)
}

// fitsV1 names the first field of h too large for NIfTI-1's 16-bit and
// 8-bit fields, or returns "".
func fitsV1(h *Header) string {
	i16 := func(x int64) bool { return x >= math.MinInt16 && x <= math.MaxInt16 }
	for i := 1; i < 8; i++ {
		if !i16(h.Dim[i]) {
			return fmt.Sprintf("dim[%d] = %d", i, h.Dim[i])
		}
	}
	switch {
	case !i16(h.SliceStart) || !i16(h.SliceEnd):
		return "slice_start/slice_end"
	case !i16(int64(h.IntentCode)):
		return "intent_code"
	case !i16(int64(h.QformCode)) || !i16(int64(h.SformCode)):
		return "qform_code/sform_code"
	case h.SliceCode < 0 || h.SliceCode > 255:
		return "slice_code"
	}
	return ""
}

// encode returns the whole file image: header, extensions and data.
func encode(v *Volume) ([]byte, error) {
	h := v.Header
	if !h.Datatype.Supported() {
		return nil, fmt.Errorf("%w: datatype %v cannot be written", ErrUnsupported, h.Datatype)
	}
	if err := h.validate(); err != nil {
		return nil, err
	}
	if len(v.Data) != h.Len() {
		return nil, fmt.Errorf("%w: %d values for dims %v (%d voxels)", ErrInvalid, len(v.Data), h.Dim[1:h.Dim[0]+1], h.Len())
	}
	version, err := chooseVersion(&h)
	if err != nil {
		return nil, err
	}
	size := sizeV1
	if version == 2 {
		size = sizeV2
	}
	extBytes := 0
	for _, e := range h.Extensions {
		extBytes += extSize(e)
	}
	h.VoxOffset = int64(size + 4 + extBytes)
	es := h.Datatype.Size()
	out := make([]byte, h.VoxOffset+int64(len(v.Data)*es))
	if version == 1 {
		h.encodeV1(out[:sizeV1])
	} else {
		h.encodeV2(out[:sizeV2])
	}
	if len(h.Extensions) > 0 {
		out[size] = 1
		p := size + 4
		for _, e := range h.Extensions {
			n := extSize(e)
			binary.LittleEndian.PutUint32(out[p:], uint32(n))
			binary.LittleEndian.PutUint32(out[p+4:], uint32(e.Code))
			copy(out[p+8:], e.Data)
			p += n
		}
	}
	if err := putData(out[h.VoxOffset:], v.Data, &h); err != nil {
		return nil, err
	}
	return out, nil
}

// extSize is the on-disk size of e: 8 bytes of esize and ecode plus the
// data, padded to a multiple of 16 as the standard requires.
func extSize(e Extension) int { return (8 + len(e.Data) + 15) &^ 15 }

// putString copies s into a fixed-size, NUL-padded field; a string that
// fills the field exactly has no terminating NUL, as the standard allows.
func putString(dst []byte, s string) { copy(dst, s) }

func (h *Header) encodeV1(b []byte) {
	le := binary.LittleEndian
	i16 := func(off int, x int64) { le.PutUint16(b[off:], uint16(int16(x))) }
	f32 := func(off int, x float64) { le.PutUint32(b[off:], math.Float32bits(float32(x))) }
	le.PutUint32(b, sizeV1)
	b[38] = 'r'
	b[39] = h.DimInfo
	for i := range 8 {
		i16(40+2*i, h.Dim[i])
		f32(76+4*i, h.Pixdim[i])
	}
	f32(56, h.IntentP1)
	f32(60, h.IntentP2)
	f32(64, h.IntentP3)
	i16(68, int64(h.IntentCode))
	i16(70, int64(h.Datatype))
	i16(72, int64(h.Datatype.bitpix()))
	i16(74, h.SliceStart)
	f32(108, float64(h.VoxOffset))
	f32(112, h.SclSlope)
	f32(116, h.SclInter)
	i16(120, h.SliceEnd)
	b[122] = uint8(h.SliceCode)
	b[123] = h.XYZTUnits
	f32(124, h.CalMax)
	f32(128, h.CalMin)
	f32(132, h.SliceDuration)
	f32(136, h.Toffset)
	putString(b[148:228], h.Descrip)
	putString(b[228:252], h.AuxFile)
	i16(252, int64(h.QformCode))
	i16(254, int64(h.SformCode))
	f32(256, h.QuaternB)
	f32(260, h.QuaternC)
	f32(264, h.QuaternD)
	f32(268, h.QoffsetX)
	f32(272, h.QoffsetY)
	f32(276, h.QoffsetZ)
	for r := range 3 {
		for c := range 4 {
			f32(280+16*r+4*c, h.Srow[r][c])
		}
	}
	putString(b[328:344], h.IntentName)
	copy(b[344:348], magicV1)
}

func (h *Header) encodeV2(b []byte) {
	le := binary.LittleEndian
	i32 := func(off int, x int32) { le.PutUint32(b[off:], uint32(x)) }
	i64 := func(off int, x int64) { le.PutUint64(b[off:], uint64(x)) }
	f64 := func(off int, x float64) { le.PutUint64(b[off:], math.Float64bits(x)) }
	le.PutUint32(b, sizeV2)
	copy(b[4:12], magicV2)
	le.PutUint16(b[12:], uint16(h.Datatype))
	le.PutUint16(b[14:], uint16(h.Datatype.bitpix()))
	for i := range 8 {
		i64(16+8*i, h.Dim[i])
		f64(104+8*i, h.Pixdim[i])
	}
	f64(80, h.IntentP1)
	f64(88, h.IntentP2)
	f64(96, h.IntentP3)
	i64(168, h.VoxOffset)
	f64(176, h.SclSlope)
	f64(184, h.SclInter)
	f64(192, h.CalMax)
	f64(200, h.CalMin)
	f64(208, h.SliceDuration)
	f64(216, h.Toffset)
	i64(224, h.SliceStart)
	i64(232, h.SliceEnd)
	putString(b[240:320], h.Descrip)
	putString(b[320:344], h.AuxFile)
	i32(344, int32(h.QformCode))
	i32(348, int32(h.SformCode))
	f64(352, h.QuaternB)
	f64(360, h.QuaternC)
	f64(368, h.QuaternD)
	f64(376, h.QoffsetX)
	f64(384, h.QoffsetY)
	f64(392, h.QoffsetZ)
	for r := range 3 {
		for c := range 4 {
			f64(400+32*r+8*c, h.Srow[r][c])
		}
	}
	i32(496, h.SliceCode)
	i32(500, int32(h.XYZTUnits))
	i32(504, h.IntentCode)
	putString(b[508:524], h.IntentName)
	b[524] = h.DimInfo
}

// putData stores values little-endian as h.Datatype, inverting the
// header's scaling (stored = (value-inter)/slope) when it is not the
// identity. Integer types round to nearest; NaN, ±Inf or out-of-range
// values are an error naming the first offending voxel.
func putData(dst []byte, data []float32, h *Header) error {
	slope, inter, scaled := h.scaling()
	dt := h.Datatype
	le := binary.LittleEndian
	if !scaled {
		switch dt {
		case Float32:
			for i, x := range data {
				le.PutUint32(dst[4*i:], math.Float32bits(x))
			}
			return nil
		case Float64:
			for i, x := range data {
				le.PutUint64(dst[8*i:], math.Float64bits(float64(x)))
			}
			return nil
		}
	}
	lo, hi := dt.limits()
	for i, x := range data {
		y := float64(x)
		if scaled {
			y = (y - inter) / slope
		}
		if dt.IsInteger() {
			y = math.Round(y)
			if !(y >= lo && y <= hi) {
				return fmt.Errorf("%w: value %v at offset %d cannot be stored as %v (scl_slope %v, scl_inter %v)",
					ErrInvalid, x, i, dt, h.SclSlope, h.SclInter)
			}
		}
		switch dt {
		case Uint8:
			dst[i] = uint8(y)
		case Int8:
			dst[i] = uint8(int8(y))
		case Int16:
			le.PutUint16(dst[2*i:], uint16(int16(y)))
		case Uint16:
			le.PutUint16(dst[2*i:], uint16(y))
		case Int32:
			le.PutUint32(dst[4*i:], uint32(int32(y)))
		case Uint32:
			le.PutUint32(dst[4*i:], uint32(y))
		case Int64:
			le.PutUint64(dst[8*i:], uint64(int64(y)))
		case Uint64:
			le.PutUint64(dst[8*i:], uint64(y))
		case Float32:
			le.PutUint32(dst[4*i:], math.Float32bits(float32(y)))
		case Float64:
			le.PutUint64(dst[8*i:], math.Float64bits(y))
		}
	}
	return nil
}

// dictSize is deflate's window: each chunk is primed with this many
// preceding bytes.
const dictSize = 32 << 10

// writeGzip writes data as one gzip member whose deflate stream is made
// of independently compressed chunks. Every chunk but the last ends with a
// sync flush (an empty stored block, byte aligned) and every chunk but the
// first starts with a dictionary of the 32 KiB before it, so the pieces
// concatenate into a valid stream that compresses nearly as well as a
// sequential one.
func writeGzip(w io.Writer, data []byte, level int) error {
	workers := runtime.GOMAXPROCS(0)
	chunk := max(1<<20, (len(data)+15)/16)
	n := max(1, (len(data)+chunk-1)/chunk)
	workers = min(workers, n)

	out := make([][]byte, n)
	errs := make([]error, n)
	done := make([]chan struct{}, n)
	for i := range done {
		done[i] = make(chan struct{})
	}
	jobs := make(chan int, n)
	for i := range n {
		jobs <- i
	}
	close(jobs)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				out[i], errs[i] = deflateChunk(data, i*chunk, min((i+1)*chunk, len(data)), i == n-1, level)
				close(done[i])
			}
		})
	}
	defer wg.Wait()

	crc := crc32.ChecksumIEEE(data)
	// Header: magic, CM=deflate, no flags, no mtime, XFL=0, OS=unknown.
	if _, err := w.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255}); err != nil {
		return err
	}
	for i := range n {
		<-done[i]
		if errs[i] != nil {
			return errs[i]
		}
		if _, err := w.Write(out[i]); err != nil {
			return err
		}
		out[i] = nil
	}
	var tail [8]byte
	binary.LittleEndian.PutUint32(tail[:], crc)
	binary.LittleEndian.PutUint32(tail[4:], uint32(len(data)))
	_, err := w.Write(tail[:])
	return err
}

func deflateChunk(data []byte, start, end int, last bool, level int) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow((end-start)/2 + 64)
	var fw *flate.Writer
	var err error
	if start == 0 {
		fw, err = flate.NewWriter(&buf, level)
	} else {
		fw, err = flate.NewWriterDict(&buf, level, data[max(0, start-dictSize):start])
	}
	if err != nil {
		return nil, err
	}
	if _, err := fw.Write(data[start:end]); err != nil {
		return nil, err
	}
	if last {
		err = fw.Close()
	} else {
		err = fw.Flush()
	}
	return buf.Bytes(), err
}
