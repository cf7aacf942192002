package nifti

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Sizes of the two header layouts and the smallest data offset of a
// single-file image (header plus the 4-byte extension flag).
const (
	sizeV1      = 348
	sizeV2      = 540
	minOffsetV1 = sizeV1 + 4
	minOffsetV2 = sizeV2 + 4
	magicV1     = "n+1\x00"
	magicPairV1 = "ni1\x00"
	magicV2     = "n+2\x00\r\n\x1a\n"
	magicPairV2 = "ni2\x00\r\n\x1a\n"
)

// Errors that reading wraps, so callers can tell the classes apart with
// errors.Is. The full message always names the file and the problem.
var (
	// ErrNotNIfTI: the input is not a NIfTI-1 or NIfTI-2 image (wrong
	// sizeof_hdr or magic).
	ErrNotNIfTI = errors.New("not a NIfTI-1 or NIfTI-2 file")
	// ErrTruncated: the header, the extensions or the voxel data end
	// before the size the header declares.
	ErrTruncated = errors.New("truncated")
	// ErrInvalid: the header is inconsistent (dimensions, bitpix,
	// vox_offset, scaling, unrepresentable values on write).
	ErrInvalid = errors.New("invalid header")
	// ErrUnsupported: a valid file this package does not handle (complex
	// or RGB datatypes, .hdr/.img pairs).
	ErrUnsupported = errors.New("unsupported")
	// ErrCorrupt: the gzip stream is damaged (bad header, checksum or
	// deflate data).
	ErrCorrupt = errors.New("corrupt gzip stream")
)

// XformCode is a qform_code or sform_code: what space the voxel-to-world
// transform maps into. Zero means the transform is absent.
type XformCode int32

// Transform codes of nifti1.h (Template is a NIfTI-2 addition).
const (
	XformUnknown     XformCode = 0
	XformScannerAnat XformCode = 1
	XformAlignedAnat XformCode = 2
	XformTalairach   XformCode = 3
	XformMNI152      XformCode = 4
	XformTemplate    XformCode = 5
)

// Units is a spatial or temporal unit code of the xyzt_units field.
type Units uint8

// Unit codes of nifti1.h. Spatial codes occupy bits 0-2, temporal codes
// bits 3-5 of xyzt_units.
const (
	UnitsUnknown Units = 0
	UnitsMeter   Units = 1
	UnitsMM      Units = 2
	UnitsMicron  Units = 3
	UnitsSec     Units = 8
	UnitsMsec    Units = 16
	UnitsUsec    Units = 24
	UnitsHz      Units = 32
	UnitsPPM     Units = 40
	UnitsRads    Units = 48
)

// String returns a short name for the unit ("mm", "s", ...).
func (u Units) String() string {
	switch u {
	case UnitsUnknown:
		return "unknown"
	case UnitsMeter:
		return "m"
	case UnitsMM:
		return "mm"
	case UnitsMicron:
		return "um"
	case UnitsSec:
		return "s"
	case UnitsMsec:
		return "ms"
	case UnitsUsec:
		return "us"
	case UnitsHz:
		return "Hz"
	case UnitsPPM:
		return "ppm"
	case UnitsRads:
		return "rad/s"
	}
	return fmt.Sprintf("Units(%d)", uint8(u))
}

// Extension is one header extension (the blocks between the header and
// vox_offset). Data holds esize-8 bytes, including any zero padding.
type Extension struct {
	Code int32
	Data []byte
}

// Header is a NIfTI-1 or NIfTI-2 header with every field widened to the
// NIfTI-2 types. Fields the standard marks unused (ANALYZE leftovers such
// as glmax) are dropped; they are written as zero.
type Header struct {
	// Version is 1 or 2 after reading. On writing, 0 picks NIfTI-1 unless
	// a dimension or index needs NIfTI-2's 64-bit fields.
	Version int
	// ByteOrder is the file's byte order after reading; writing always
	// uses little-endian.
	ByteOrder binary.ByteOrder

	// Dim[0] is the number of dimensions (1..7); Dim[1..Dim[0]] are the
	// sizes, x fastest. Entries past Dim[0] are 1.
	Dim [8]int64
	// Pixdim[1..] are the voxel sizes (and TR in Pixdim[4]); Pixdim[0] is
	// qfac, the handedness of the qform (-1 or +1; 0 is read as +1).
	Pixdim   [8]float64
	Datatype Datatype
	// VoxOffset is the byte offset of the voxel data in the file as read;
	// the writer recomputes it.
	VoxOffset int64

	// SclSlope and SclInter map stored values to real ones:
	// real = SclSlope*stored + SclInter, applied by Read when SclSlope is
	// neither 0 nor NaN (the standard's "no scaling").
	SclSlope, SclInter float64
	CalMax, CalMin     float64

	DimInfo                uint8
	SliceCode              int32
	SliceStart, SliceEnd   int64
	SliceDuration, Toffset float64
	XYZTUnits              uint8

	IntentCode                   int32
	IntentP1, IntentP2, IntentP3 float64
	// IntentName (16 bytes), Descrip (80) and AuxFile (24) are
	// NUL-terminated fields on disk; longer strings are cut on writing.
	IntentName string
	Descrip    string
	AuxFile    string

	QformCode XformCode
	SformCode XformCode
	// Quaternion (b, c, d; a is implied) and offsets of the qform.
	QuaternB, QuaternC, QuaternD float64
	QoffsetX, QoffsetY, QoffsetZ float64
	// Srow holds the first three rows of the sform matrix.
	Srow [3][4]float64

	Extensions []Extension
}

// SpatialUnits returns the spatial part of XYZTUnits.
func (h *Header) SpatialUnits() Units { return Units(h.XYZTUnits & 0x07) }

// TimeUnits returns the temporal part of XYZTUnits.
func (h *Header) TimeUnits() Units { return Units(h.XYZTUnits & 0x38) }

// SetUnits sets XYZTUnits from a spatial and a temporal unit code.
func (h *Header) SetUnits(space, time Units) { h.XYZTUnits = uint8(space&0x07) | uint8(time&0x38) }

// NDim returns Dim[0], the number of dimensions.
func (h *Header) NDim() int { return int(h.Dim[0]) }

// NumVoxels returns the number of voxels of one 3-D volume (the product of
// the first three dimensions, missing ones counting as 1).
func (h *Header) NumVoxels() int { return int(h.Dim[1] * h.Dim[2] * h.Dim[3]) }

// NumVolumes returns the number of 3-D volumes: the product of Dim[4..7]
// (1 for a 3-D image).
func (h *Header) NumVolumes() int { return int(h.Dim[4] * h.Dim[5] * h.Dim[6] * h.Dim[7]) }

// Len returns the total number of values, NumVoxels()*NumVolumes().
func (h *Header) Len() int { return h.NumVoxels() * h.NumVolumes() }

// scaling returns the slope and intercept to apply on read and whether
// they change anything.
func (h *Header) scaling() (slope, inter float64, ok bool) {
	slope, inter = h.SclSlope, h.SclInter
	if slope == 0 || math.IsNaN(slope) {
		return 1, 0, false
	}
	if math.IsNaN(inter) {
		inter = 0
	}
	return slope, inter, slope != 1 || inter != 0
}

// headerSize reports the header layout from the first four bytes of a
// file: the version (1 or 2), its byte order, or ok=false.
func headerSize(b []byte) (version int, order binary.ByteOrder, ok bool) {
	if len(b) < 4 {
		return 0, nil, false
	}
	switch {
	case binary.LittleEndian.Uint32(b) == sizeV1:
		return 1, binary.LittleEndian, true
	case binary.BigEndian.Uint32(b) == sizeV1:
		return 1, binary.BigEndian, true
	case binary.LittleEndian.Uint32(b) == sizeV2:
		return 2, binary.LittleEndian, true
	case binary.BigEndian.Uint32(b) == sizeV2:
		return 2, binary.BigEndian, true
	}
	return 0, nil, false
}

// ParseHeader decodes and validates a NIfTI-1 or NIfTI-2 header from the
// start of b (at least 348 or 540 bytes; any extensions that follow in b
// before vox_offset are decoded too). The byte order is detected from
// sizeof_hdr. It checks everything that does not need the file size:
// magic, dimensions, datatype, bitpix, vox_offset and scaling.
func ParseHeader(b []byte) (*Header, error) {
	h, err := parseHeader(b)
	if err != nil {
		return nil, fmt.Errorf("nifti: %w", err)
	}
	h.Extensions = parseExtensions(b, h)
	return h, nil
}

// parseHeader decodes the fixed-size header at the start of b. Errors are
// not prefixed with the package or file name.
func parseHeader(b []byte) (*Header, error) {
	version, bo, ok := headerSize(b)
	if !ok {
		if len(b) < 4 {
			return nil, fmt.Errorf("%w: header has %d of at least 348 bytes", ErrTruncated, len(b))
		}
		return nil, fmt.Errorf("%w: sizeof_hdr is %d, want 348 or 540 in either byte order",
			ErrNotNIfTI, binary.LittleEndian.Uint32(b))
	}
	size := sizeV1
	if version == 2 {
		size = sizeV2
	}
	if len(b) < size {
		return nil, fmt.Errorf("%w: header has %d of %d bytes", ErrTruncated, len(b), size)
	}
	h := &Header{Version: version, ByteOrder: bo}
	if version == 1 {
		if err := h.decodeV1(b[:sizeV1]); err != nil {
			return nil, err
		}
	} else if err := h.decodeV2(b[:sizeV2]); err != nil {
		return nil, err
	}
	if err := h.validate(); err != nil {
		return nil, err
	}
	return h, nil
}

func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func (h *Header) decodeV1(b []byte) error {
	bo := h.ByteOrder
	switch m := string(b[344:348]); m {
	case magicV1:
	case magicPairV1:
		return fmt.Errorf("%w: two-file NIfTI-1 (.hdr/.img pair, magic \"ni1\"); only single-file .nii is read", ErrUnsupported)
	default:
		return fmt.Errorf("%w: magic is %q, want \"n+1\" (ANALYZE 7.5 files are not read)", ErrNotNIfTI, m)
	}
	i16 := func(off int) int16 { return int16(bo.Uint16(b[off:])) }
	f32 := func(off int) float64 { return float64(math.Float32frombits(bo.Uint32(b[off:]))) }

	h.DimInfo = b[39]
	for i := range 8 {
		h.Dim[i] = int64(i16(40 + 2*i))
		h.Pixdim[i] = f32(76 + 4*i)
	}
	h.IntentP1, h.IntentP2, h.IntentP3 = f32(56), f32(60), f32(64)
	h.IntentCode = int32(i16(68))
	h.Datatype = Datatype(i16(70))
	bitpix := int(i16(72))
	h.SliceStart = int64(i16(74))
	off := f32(108)
	h.SclSlope, h.SclInter = f32(112), f32(116)
	h.SliceEnd = int64(i16(120))
	h.SliceCode = int32(b[122])
	h.XYZTUnits = b[123]
	h.CalMax, h.CalMin = f32(124), f32(128)
	h.SliceDuration, h.Toffset = f32(132), f32(136)
	h.Descrip = cstring(b[148:228])
	h.AuxFile = cstring(b[228:252])
	h.QformCode, h.SformCode = XformCode(i16(252)), XformCode(i16(254))
	h.QuaternB, h.QuaternC, h.QuaternD = f32(256), f32(260), f32(264)
	h.QoffsetX, h.QoffsetY, h.QoffsetZ = f32(268), f32(272), f32(276)
	for r := range 3 {
		for c := range 4 {
			h.Srow[r][c] = f32(280 + 16*r + 4*c)
		}
	}
	h.IntentName = cstring(b[328:344])

	if err := h.checkDatatype(bitpix); err != nil {
		return err
	}
	// vox_offset is a float in NIfTI-1; it must hold a whole byte count.
	if math.IsNaN(off) || off < minOffsetV1 || off > 1<<40 || off != math.Trunc(off) {
		return fmt.Errorf("%w: vox_offset %v is not a whole number ≥ %d", ErrInvalid, off, minOffsetV1)
	}
	h.VoxOffset = int64(off)
	return nil
}

func (h *Header) decodeV2(b []byte) error {
	bo := h.ByteOrder
	switch m := string(b[4:12]); {
	case m == magicV2:
	case m == magicPairV2:
		return fmt.Errorf("%w: two-file NIfTI-2 (.hdr/.img pair, magic \"ni2\"); only single-file .nii is read", ErrUnsupported)
	case m[:4] == magicV2[:4]:
		return fmt.Errorf("%w: NIfTI-2 magic bytes 4-7 are %q, want \"\\r\\n\\x1a\\n\" (file altered by a text-mode transfer?)", ErrInvalid, m[4:])
	default:
		return fmt.Errorf("%w: magic is %q, want \"n+2\"", ErrNotNIfTI, m)
	}
	i32 := func(off int) int32 { return int32(bo.Uint32(b[off:])) }
	i64 := func(off int) int64 { return int64(bo.Uint64(b[off:])) }
	f64 := func(off int) float64 { return math.Float64frombits(bo.Uint64(b[off:])) }

	h.Datatype = Datatype(int16(bo.Uint16(b[12:])))
	bitpix := int(int16(bo.Uint16(b[14:])))
	for i := range 8 {
		h.Dim[i] = i64(16 + 8*i)
		h.Pixdim[i] = f64(104 + 8*i)
	}
	h.IntentP1, h.IntentP2, h.IntentP3 = f64(80), f64(88), f64(96)
	h.VoxOffset = i64(168)
	h.SclSlope, h.SclInter = f64(176), f64(184)
	h.CalMax, h.CalMin = f64(192), f64(200)
	h.SliceDuration, h.Toffset = f64(208), f64(216)
	h.SliceStart, h.SliceEnd = i64(224), i64(232)
	h.Descrip = cstring(b[240:320])
	h.AuxFile = cstring(b[320:344])
	h.QformCode, h.SformCode = XformCode(i32(344)), XformCode(i32(348))
	h.QuaternB, h.QuaternC, h.QuaternD = f64(352), f64(360), f64(368)
	h.QoffsetX, h.QoffsetY, h.QoffsetZ = f64(376), f64(384), f64(392)
	for r := range 3 {
		for c := range 4 {
			h.Srow[r][c] = f64(400 + 32*r + 8*c)
		}
	}
	h.SliceCode = i32(496)
	h.XYZTUnits = uint8(i32(500))
	h.IntentCode = i32(504)
	h.IntentName = cstring(b[508:524])
	h.DimInfo = b[524]

	if err := h.checkDatatype(bitpix); err != nil {
		return err
	}
	if h.VoxOffset < minOffsetV2 {
		return fmt.Errorf("%w: vox_offset %d is below %d", ErrInvalid, h.VoxOffset, minOffsetV2)
	}
	return nil
}

func (h *Header) checkDatatype(bitpix int) error {
	want := h.Datatype.bitpix()
	switch {
	case want == 0:
		return fmt.Errorf("%w: unknown datatype code %d", ErrInvalid, int16(h.Datatype))
	case !h.Datatype.Supported():
		return fmt.Errorf("%w: datatype %v (code %d) is not read; supported: uint8, int8, int16, uint16, int32, uint32, int64, uint64, float32, float64",
			ErrUnsupported, h.Datatype, int16(h.Datatype))
	case bitpix != want:
		return fmt.Errorf("%w: bitpix %d does not match datatype %v (%d bits)", ErrInvalid, bitpix, h.Datatype, want)
	}
	return nil
}

// maxValues bounds the number of values an image may declare, so that byte
// counts stay far from int64 overflow.
const maxValues = 1 << 56

// validate checks the dimensions and scaling and normalises unused Dim
// entries to 1.
func (h *Header) validate() error {
	nd := h.Dim[0]
	if nd < 1 || nd > 7 {
		return fmt.Errorf("%w: dim[0] = %d, want 1..7", ErrInvalid, nd)
	}
	n := int64(1)
	for i := 1; i <= int(nd); i++ {
		d := h.Dim[i]
		if d < 1 {
			return fmt.Errorf("%w: dim[%d] = %d, dimensions must be positive (dim = %v)", ErrInvalid, i, d, h.Dim[:nd+1])
		}
		if d > maxValues/n {
			return fmt.Errorf("%w: dim = %v declares more than 2^56 values", ErrInvalid, h.Dim[:nd+1])
		}
		n *= d
	}
	for i := int(nd) + 1; i < 8; i++ {
		h.Dim[i] = 1
	}
	if math.IsInf(h.SclSlope, 0) {
		return fmt.Errorf("%w: scl_slope is %v", ErrInvalid, h.SclSlope)
	}
	if s := h.SclSlope; s != 0 && !math.IsNaN(s) && math.IsInf(h.SclInter, 0) {
		return fmt.Errorf("%w: scl_inter is %v", ErrInvalid, h.SclInter)
	}
	return nil
}

// dataBytes returns the size in bytes of the voxel data.
func (h *Header) dataBytes() int64 { return int64(h.Len()) * int64(h.Datatype.Size()) }

// parseExtensions decodes the extension chain that follows the header in
// b, up to vox_offset (or the end of b). A malformed chain ends the list,
// as in nifti_clib: extensions are metadata and the voxel data start at
// vox_offset regardless.
func parseExtensions(b []byte, h *Header) []Extension {
	start := int64(sizeV1)
	if h.Version == 2 {
		start = sizeV2
	}
	end := min(h.VoxOffset, int64(len(b)))
	if start+4 > end || b[start] == 0 {
		return nil
	}
	var exts []Extension
	for p := start + 4; p+8 <= end; {
		esize := int64(int32(h.ByteOrder.Uint32(b[p:])))
		code := int32(h.ByteOrder.Uint32(b[p+4:]))
		if esize < 8 || esize > end-p {
			break
		}
		exts = append(exts, Extension{Code: code, Data: bytes.Clone(b[p+8 : p+esize])})
		p += esize
	}
	return exts
}
