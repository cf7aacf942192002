package nifti

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// maxDeflateRatio bounds how many bytes one compressed byte can expand to
// (a deflate stream needs at least 2 bits per 258-byte match). A gzip file
// of s bytes therefore holds at most maxDeflateRatio·s bytes, which caps
// what a header may make the reader allocate.
const maxDeflateRatio = 1032

// chunkSize is the unit in which voxel data are read and converted.
const chunkSize = 1 << 20

// Read reads a single-file NIfTI-1 or NIfTI-2 image, uncompressed (.nii)
// or gzip-compressed (.nii.gz; detected from the content, not the name;
// multi-member streams are read whole). Values are converted to float32
// and scaled by scl_slope/scl_inter unless the slope is 0 or NaN. Errors
// name the file and wrap ErrNotNIfTI, ErrTruncated, ErrInvalid,
// ErrUnsupported or ErrCorrupt.
func Read(path string) (*Volume, error) {
	src, closeFn, err := open(path)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	return src.decode(false)
}

// ReadHeader reads only the header and extensions of a .nii or .nii.gz
// file. Checks that need the whole file (data length, gzip checksum) are
// left to Read, except that a vox_offset beyond the end of an
// uncompressed file is reported.
func ReadHeader(path string) (*Header, error) {
	src, closeFn, err := open(path)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	v, err := src.decode(true)
	if err != nil {
		return nil, err
	}
	return &v.Header, nil
}

// Decode decodes a whole .nii or .nii.gz file held in data; name is used
// in error messages only.
func Decode(name string, data []byte) (*Volume, error) {
	src, err := newSource(name, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	return src.decode(false)
}

// source is a decompressed byte stream with an upper bound on its length.
type source struct {
	name  string
	r     io.Reader
	limit int64       // the stream cannot be longer than this
	gz    *gzipReader // nil for an uncompressed file
}

func open(path string) (*source, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("nifti: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("nifti: %w", err)
	}
	src, err := newSource(path, f, st.Size())
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return src, func() { f.Close() }, nil
}

func newSource(name string, r io.Reader, size int64) (*source, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	s := &source{name: name, r: br, limit: size}
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, s.gzipErr(err)
		}
		zr.Multistream(false)
		s.gz = &gzipReader{zr: zr, br: br}
		s.r = s.gz
		s.limit = maxDeflateRatio*size + 1024
	}
	return s, nil
}

// errGzipShort marks a compressed stream that ends inside a member.
var errGzipShort = errors.New("compressed stream ends early")

// gzipReader reads a sequence of gzip members, each checked against its
// CRC-32 and length when its end is reached. It moves on to the next
// member only when more bytes are requested, so once final is set it stops
// at the end of the current member and whatever follows (zero padding,
// garbage, more members) is never parsed. It also tells a truncated
// compressed stream apart from a complete stream that holds too few bytes,
// which io.ReadFull would both report as io.ErrUnexpectedEOF.
type gzipReader struct {
	zr        *gzip.Reader // in single-member mode
	br        *bufio.Reader
	memberEnd bool // the current member is complete
	final     bool // do not start another member
}

func (g *gzipReader) Read(p []byte) (int, error) {
	for {
		if g.memberEnd {
			if g.final {
				return 0, io.EOF
			}
			if err := g.zr.Reset(g.br); err != nil {
				if err == io.ErrUnexpectedEOF {
					err = errGzipShort
				}
				return 0, err // io.EOF: no further member
			}
			g.zr.Multistream(false)
			g.memberEnd = false
		}
		n, err := g.zr.Read(p)
		switch {
		case err == io.EOF:
			g.memberEnd = true
			if n > 0 {
				return n, nil
			}
		case err == io.ErrUnexpectedEOF:
			return n, errGzipShort
		default:
			return n, err
		}
	}
}

func (s *source) errorf(format string, args ...any) error {
	return fmt.Errorf("nifti: %s: "+format, append([]any{s.name}, args...)...)
}

func (s *source) gzipErr(err error) error {
	if errors.Is(err, errGzipShort) || err == io.ErrUnexpectedEOF {
		return s.errorf("%w: %w", ErrTruncated, errGzipShort)
	}
	return s.errorf("%w: %w", ErrCorrupt, err)
}

// readFull reads len(b) bytes and reports how many arrived before the
// stream ended; err is nil when the stream merely ended early.
func (s *source) readFull(b []byte) (int, error) {
	n, err := io.ReadFull(s.r, b)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return n, nil
	}
	if err != nil {
		if s.gz != nil {
			return n, s.gzipErr(err)
		}
		return n, s.errorf("%w", err)
	}
	return n, nil
}

func (s *source) decode(headerOnly bool) (*Volume, error) {
	var buf [sizeV2]byte
	n, err := s.readFull(buf[:4])
	if err != nil {
		return nil, err
	}
	version, _, ok := headerSize(buf[:n])
	if !ok {
		_, err := parseHeader(buf[:n]) // for the error message
		return nil, s.errorf("%w", err)
	}
	size := sizeV1
	if version == 2 {
		size = sizeV2
	}
	m, err := s.readFull(buf[4:size])
	if err != nil {
		return nil, err
	}
	h, err := parseHeader(buf[:4+m])
	if err != nil {
		return nil, s.errorf("%w", err)
	}
	dataBytes := h.dataBytes()
	bound := "the file has"
	if s.gz != nil {
		bound = "a gzip stream of this size holds at most"
	}
	if h.VoxOffset > s.limit {
		return nil, s.errorf("%w: vox_offset %d is beyond the end of the file (%s %d bytes)", ErrInvalid, h.VoxOffset, bound, s.limit)
	}
	if !headerOnly && h.VoxOffset+dataBytes > s.limit {
		return nil, s.errorf("%w: data: header declares %d bytes at offset %d (dim %v × %d bytes), but %s %d bytes",
			ErrTruncated, dataBytes, h.VoxOffset, h.Dim[1:h.Dim[0]+1], h.Datatype.Size(), bound, s.limit)
	}

	// Extensions, then skip to vox_offset.
	ext := make([]byte, h.VoxOffset)
	copy(ext, buf[:size])
	m, err = s.readFull(ext[size:])
	if err != nil {
		return nil, err
	}
	if int64(size+m) < h.VoxOffset {
		return nil, s.errorf("%w: file ends at byte %d, before vox_offset %d", ErrTruncated, size+m, h.VoxOffset)
	}
	h.Extensions = parseExtensions(ext, h)
	v := &Volume{Header: *h}
	if headerOnly {
		return v, nil
	}

	v.Data = make([]float32, h.Len())
	if err := s.readData(v); err != nil {
		return nil, err
	}
	if s.gz != nil {
		// Finish the member holding the last data bytes, so that gzip
		// verifies its CRC-32 (earlier members were verified on the way).
		// Anything after that member holds no image data and is ignored,
		// as zlib does: more members, zero padding or other trailing bytes.
		s.gz.final = true
		if _, err := io.Copy(io.Discard, s.r); err != nil {
			return nil, s.gzipErr(err)
		}
	}
	return v, nil
}

// readData fills v.Data from the stream positioned at vox_offset.
func (s *source) readData(v *Volume) error {
	dt := v.Datatype
	es := dt.Size()
	swap := v.ByteOrder == binary.BigEndian && es > 1
	slope, inter, scaled := v.scaling()
	total := int64(len(v.Data)) * int64(es)
	buf := make([]byte, min(int64(chunkSize), total))
	var done int64
	for off := 0; off < len(v.Data); {
		k := min(len(buf)/es, len(v.Data)-off)
		b := buf[:k*es]
		n, err := s.readFull(b)
		if err != nil {
			return err
		}
		if n < len(b) {
			return s.errorf("%w: data: %d of %d bytes after vox_offset %d", ErrTruncated, done+int64(n), total, v.VoxOffset)
		}
		if swap {
			swapBytes(b, es)
		}
		convert(v.Data[off:off+k], b, dt, slope, inter, scaled)
		off += k
		done += int64(n)
	}
	return nil
}

// swapBytes reverses the byte order of each es-byte element of b.
func swapBytes(b []byte, es int) {
	switch es {
	case 2:
		for i := 0; i+1 < len(b); i += 2 {
			b[i], b[i+1] = b[i+1], b[i]
		}
	case 4:
		for i := 0; i+3 < len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], binary.BigEndian.Uint32(b[i:]))
		}
	case 8:
		for i := 0; i+7 < len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], binary.BigEndian.Uint64(b[i:]))
		}
	}
}

// convert decodes little-endian values of type dt from src into dst,
// applying real = slope·stored + inter (in float64) when scaled.
func convert(dst []float32, src []byte, dt Datatype, slope, inter float64, scaled bool) {
	le := binary.LittleEndian
	if scaled {
		for i := range dst {
			dst[i] = float32(rawFloat64(src, i, dt)*slope + inter)
		}
		return
	}
	switch dt {
	case Uint8:
		for i := range dst {
			dst[i] = float32(src[i])
		}
	case Int8:
		for i := range dst {
			dst[i] = float32(int8(src[i]))
		}
	case Int16:
		for i := range dst {
			dst[i] = float32(int16(le.Uint16(src[2*i:])))
		}
	case Uint16:
		for i := range dst {
			dst[i] = float32(le.Uint16(src[2*i:]))
		}
	case Int32:
		for i := range dst {
			dst[i] = float32(int32(le.Uint32(src[4*i:])))
		}
	case Uint32:
		for i := range dst {
			dst[i] = float32(le.Uint32(src[4*i:]))
		}
	case Float32:
		for i := range dst {
			dst[i] = math.Float32frombits(le.Uint32(src[4*i:]))
		}
	default: // 8-byte types
		for i := range dst {
			dst[i] = float32(rawFloat64(src, i, dt))
		}
	}
}

// rawFloat64 returns element i of little-endian src as float64.
func rawFloat64(src []byte, i int, dt Datatype) float64 {
	le := binary.LittleEndian
	switch dt {
	case Uint8:
		return float64(src[i])
	case Int8:
		return float64(int8(src[i]))
	case Int16:
		return float64(int16(le.Uint16(src[2*i:])))
	case Uint16:
		return float64(le.Uint16(src[2*i:]))
	case Int32:
		return float64(int32(le.Uint32(src[4*i:])))
	case Uint32:
		return float64(le.Uint32(src[4*i:]))
	case Float32:
		return float64(math.Float32frombits(le.Uint32(src[4*i:])))
	case Int64:
		return float64(int64(le.Uint64(src[8*i:])))
	case Uint64:
		return float64(le.Uint64(src[8*i:]))
	case Float64:
		return math.Float64frombits(le.Uint64(src[8*i:]))
	}
	panic("nifti: unsupported datatype " + dt.String())
}
