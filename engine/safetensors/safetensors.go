// Package safetensors reads and writes the safetensors file format, the
// checkpoint format of prism's neural engine.
//
// A safetensors file is an 8-byte little-endian unsigned header length N,
// then N bytes of UTF-8 JSON mapping each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} plus an optional
// "__metadata__" object of string→string, then the raw little-endian data
// buffer. Offsets are relative to the start of the data buffer; the tensors'
// byte ranges tile the buffer exactly (contiguous, no gaps, no overlap).
//
// prism always writes float32 ("F32") tensors, in name order, with a header
// whose bytes depend only on the content, so the same tensors and metadata
// always give a byte-identical file. Write replaces its target atomically.
// Reading accepts the float dtypes F64, F32, F16 and BF16 and the integer and
// boolean dtypes, all converted to float32, and validates the whole file
// (header bounds, JSON, dtypes, shapes, offsets) before returning anything.
package safetensors

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/prismsbi/prism/internal/atomicfile"
)

// Tensor is a named float32 array in row-major order.
type Tensor struct {
	Name  string
	Shape []int // empty for a scalar
	Data  []float32
}

// MetadataKey is the reserved header key holding the string→string metadata.
const MetadataKey = "__metadata__"

// ChecksumKey is the metadata key under which Encode records the SHA-256
// (hex) of the data buffer, the bytes of every tensor in file order.
// Decode verifies it and removes it from the metadata it returns; a file
// without it (written before prism recorded checksums, or by another
// tool) still loads, and Read reports it through Warnings.
const ChecksumKey = "prism.data_sha256"

// Warnings receives Read's warning about a file without a checksum
// (os.Stderr by default; set it to io.Discard to silence it).
var Warnings io.Writer = os.Stderr

// MaxHeaderSize bounds the JSON header accepted on read (the reference
// implementation uses the same 100 MB limit), so that a corrupt length field
// cannot trigger a huge allocation.
const MaxHeaderSize = 100_000_000

// NumElements returns the number of elements of shape (1 for a scalar) or an
// error if a dimension is negative or the product overflows.
func NumElements(shape []int) (int, error) {
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		if d == 0 {
			return 0, nil
		}
	}
	n := 1
	for _, d := range shape {
		if n > math.MaxInt/4/d {
			return 0, fmt.Errorf("shape %v is too large", shape)
		}
		n *= d
	}
	return n, nil
}

// Encode writes tensors and metadata to w in safetensors format with dtype
// F32. Tensors are laid out in name order; the caller's slice is not
// modified. Names must be unique, non-empty and differ from MetadataKey, and
// each tensor's Data length must equal the product of its Shape. metadata may
// be nil.
func Encode(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	if err := encode(w, tensors, metadata); err != nil {
		return fmt.Errorf("safetensors: encode: %w", err)
	}
	return nil
}

func encode(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	order, err := checkTensors(tensors)
	if err != nil {
		return err
	}
	if _, ok := metadata[ChecksumKey]; ok {
		return fmt.Errorf("metadata key %q is reserved", ChecksumKey)
	}
	withSum := make(map[string]string, len(metadata)+1)
	maps.Copy(withSum, metadata)
	h := sha256.New()
	if err := writeData(h, tensors, order); err != nil {
		return err
	}
	withSum[ChecksumKey] = hex.EncodeToString(h.Sum(nil))
	header, err := buildHeader(tensors, order, withSum)
	if err != nil {
		return err
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(header)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return err
	}
	if _, err := w.Write(header); err != nil {
		return err
	}
	return writeData(w, tensors, order)
}

// writeData writes the tensors' float32 data little-endian in the given
// order.
func writeData(w io.Writer, tensors []Tensor, order []int) error {
	var buf [16 << 10]byte
	for _, i := range order {
		data := tensors[i].Data
		for len(data) > 0 {
			n := min(len(data), len(buf)/4)
			for j, v := range data[:n] {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(v))
			}
			if _, err := w.Write(buf[:4*n]); err != nil {
				return err
			}
			data = data[n:]
		}
	}
	return nil
}

// checkTensors validates tensors for writing and returns their indices in
// name order.
func checkTensors(tensors []Tensor) ([]int, error) {
	order := make([]int, len(tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(tensors[a].Name, tensors[b].Name) })
	for k, i := range order {
		t := &tensors[i]
		if t.Name == "" {
			return nil, errors.New("tensor with empty name")
		}
		if t.Name == MetadataKey {
			return nil, fmt.Errorf("tensor name %q is reserved", MetadataKey)
		}
		if k > 0 && tensors[order[k-1]].Name == t.Name {
			return nil, fmt.Errorf("duplicate tensor name %q", t.Name)
		}
		n, err := NumElements(t.Shape)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		if n != len(t.Data) {
			return nil, fmt.Errorf("tensor %q: shape %v has %d elements but data has %d", t.Name, t.Shape, n, len(t.Data))
		}
	}
	return order, nil
}

// buildHeader returns the JSON header padded with spaces to a multiple of 8
// bytes. The metadata object comes first with sorted keys, then the tensors
// in name order; the output depends only on the content.
func buildHeader(tensors []Tensor, order []int, metadata map[string]string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString(`"` + MetadataKey + `":{`)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSONString(&b, k); err != nil {
				return nil, err
			}
			b.WriteByte(':')
			if err := writeJSONString(&b, metadata[k]); err != nil {
				return nil, err
			}
		}
		b.WriteByte('}')
		first = false
	}
	offset := 0
	for _, i := range order {
		t := &tensors[i]
		if !first {
			b.WriteByte(',')
		}
		first = false
		if err := writeJSONString(&b, t.Name); err != nil {
			return nil, err
		}
		b.WriteString(`:{"dtype":"F32","shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%d", d)
		}
		end := offset + 4*len(t.Data)
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, offset, end)
		offset = end
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	return b.Bytes(), nil
}

func writeJSONString(b *bytes.Buffer, s string) error {
	enc, err := json.Marshal(s)
	if err != nil {
		return err
	}
	b.Write(enc)
	return nil
}

// Write stores tensors and metadata at path in safetensors format (see
// Encode). The file is written to a temporary file in the same directory,
// synced and renamed over path, so path holds either its old content or the
// complete new file, never a partial one.
func Write(path string, tensors []Tensor, metadata map[string]string) error {
	err := atomicfile.Write(path, func(w *bufio.Writer) error {
		return encode(w, tensors, metadata)
	})
	if err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	return nil
}

// Read loads a safetensors file; see Decode. Errors name the file.
func Read(path string) ([]Tensor, map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	}
	ts, meta, checked, err := decode(data)
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: read %s: %w", path, err)
	}
	if !checked && Warnings != nil {
		fmt.Fprintf(Warnings, "safetensors: warning: %s has no data checksum (%s; written by an older prism or another tool), so corruption of its weights cannot be detected; saving it again adds one\n", path, ChecksumKey)
	}
	return ts, meta, nil
}

// dtypeSize maps the supported dtypes to their element size in bytes.
var dtypeSize = map[string]int{
	"F64": 8, "F32": 4, "F16": 2, "BF16": 2,
	"I64": 8, "I32": 4, "I16": 2, "I8": 1,
	"U64": 8, "U32": 4, "U16": 2, "U8": 1,
	"BOOL": 1,
}

type headerEntry struct {
	Dtype       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

type entry struct {
	name       string
	dtype      string
	shape      []int
	begin, end int
}

// Decode parses a complete safetensors file held in data. Tensors are
// returned in name order with their data converted to float32 (F64 is
// rounded, integers above 2^24 lose precision); the metadata map is nil when
// the file has none. Decode rejects, with an error saying what is wrong: a
// header length beyond the file, a header that is not a UTF-8 JSON object,
// duplicate names, missing fields, unknown dtypes, negative dimensions,
// offsets out of range, overlapping or leaving gaps, byte ranges that do
// not match shape × dtype size, and a data buffer whose SHA-256 differs
// from the one recorded under ChecksumKey (which is removed from the
// returned metadata).
func Decode(data []byte) ([]Tensor, map[string]string, error) {
	ts, meta, _, err := decode(data)
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: decode: %w", err)
	}
	return ts, meta, nil
}

// decode is Decode; checked reports whether the file carried a checksum
// (which then matched).
func decode(data []byte) (ts []Tensor, meta map[string]string, checked bool, err error) {
	if len(data) < 8 {
		return nil, nil, false, fmt.Errorf("file has %d bytes, too short for the 8-byte header length", len(data))
	}
	hlen := binary.LittleEndian.Uint64(data)
	if hlen > MaxHeaderSize {
		return nil, nil, false, fmt.Errorf("header length %d exceeds the limit of %d bytes", hlen, MaxHeaderSize)
	}
	if hlen > uint64(len(data)-8) {
		return nil, nil, false, fmt.Errorf("header length %d exceeds the %d bytes after the length field", hlen, len(data)-8)
	}
	header := data[8 : 8+hlen]
	buf := data[8+hlen:]
	if !utf8.Valid(header) {
		return nil, nil, false, errors.New("header is not valid UTF-8")
	}
	entries, meta, err := parseHeader(header, len(buf))
	if err != nil {
		return nil, nil, false, err
	}
	if err := checkLayout(entries, len(buf)); err != nil {
		return nil, nil, false, err
	}
	if want, ok := meta[ChecksumKey]; ok {
		sum := sha256.Sum256(buf)
		if got := hex.EncodeToString(sum[:]); got != want {
			return nil, nil, false, fmt.Errorf("tensor data do not match their checksum (SHA-256 %.12s…, recorded %.12s…): the file is corrupt", got, want)
		}
		delete(meta, ChecksumKey)
		if len(meta) == 0 {
			meta = nil
		}
		checked = true
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	tensors := make([]Tensor, len(entries))
	for i, e := range entries {
		tensors[i] = Tensor{Name: e.name, Shape: e.shape, Data: convert(e.dtype, buf[e.begin:e.end])}
	}
	return tensors, meta, checked, nil
}

// parseHeader decodes the JSON header, keeping duplicate keys detectable
// (encoding/json's map decoding would silently keep the last one).
func parseHeader(header []byte, bufLen int) ([]entry, map[string]string, error) {
	if !json.Valid(header) {
		return nil, nil, errors.New("header is not valid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(header))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, fmt.Errorf("header: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, errors.New("header is not a JSON object")
	}
	var entries []entry
	var meta map[string]string
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("header: %w", err)
		}
		name := tok.(string) // object keys are always strings in valid JSON
		if name == "" {
			return nil, nil, errors.New("header: empty tensor name")
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("header: duplicate key %q", name)
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("header: key %q: %w", name, err)
		}
		if name == MetadataKey {
			if meta, err = parseMetadata(raw); err != nil {
				return nil, nil, err
			}
			continue
		}
		e, err := parseEntry(name, raw, bufLen)
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, e)
	}
	return entries, meta, nil
}

func parseMetadata(raw json.RawMessage) (map[string]string, error) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("header: %s: %w", MetadataKey, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("header: %s is not an object", MetadataKey)
	}
	meta := make(map[string]string)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("header: %s: %w", MetadataKey, err)
		}
		key := tok.(string)
		if _, dup := meta[key]; dup {
			return nil, fmt.Errorf("header: %s: duplicate key %q", MetadataKey, key)
		}
		tok, err = dec.Token()
		if err != nil {
			return nil, fmt.Errorf("header: %s: %w", MetadataKey, err)
		}
		val, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("header: %s: value of %q is not a string", MetadataKey, key)
		}
		meta[key] = val
	}
	return meta, nil
}

func parseEntry(name string, raw json.RawMessage, bufLen int) (entry, error) {
	var h headerEntry
	if err := json.Unmarshal(raw, &h); err != nil {
		return entry{}, fmt.Errorf("tensor %q: %w", name, err)
	}
	switch {
	case h.Dtype == nil:
		return entry{}, fmt.Errorf("tensor %q: missing dtype", name)
	case h.Shape == nil:
		return entry{}, fmt.Errorf("tensor %q: missing shape", name)
	case h.DataOffsets == nil:
		return entry{}, fmt.Errorf("tensor %q: missing data_offsets", name)
	}
	size, ok := dtypeSize[*h.Dtype]
	if !ok {
		return entry{}, fmt.Errorf("tensor %q: unsupported dtype %q", name, *h.Dtype)
	}
	shape := make([]int, len(*h.Shape))
	for i, d := range *h.Shape {
		if d < 0 {
			return entry{}, fmt.Errorf("tensor %q: negative dimension in shape %v", name, *h.Shape)
		}
		if d > math.MaxInt32 {
			return entry{}, fmt.Errorf("tensor %q: dimension %d too large", name, d)
		}
		shape[i] = int(d)
	}
	n, err := NumElements(shape)
	if err != nil {
		return entry{}, fmt.Errorf("tensor %q: %w", name, err)
	}
	off := *h.DataOffsets
	if len(off) != 2 {
		return entry{}, fmt.Errorf("tensor %q: data_offsets has %d values, want 2", name, len(off))
	}
	if off[0] < 0 || off[1] < off[0] {
		return entry{}, fmt.Errorf("tensor %q: invalid data_offsets [%d,%d]", name, off[0], off[1])
	}
	if off[1] > int64(bufLen) {
		return entry{}, fmt.Errorf("tensor %q: data_offsets [%d,%d] beyond the %d-byte data buffer", name, off[0], off[1], bufLen)
	}
	if n > bufLen || off[1]-off[0] != int64(n)*int64(size) {
		return entry{}, fmt.Errorf("tensor %q: data_offsets [%d,%d] span %d bytes but shape %v of %s needs %d",
			name, off[0], off[1], off[1]-off[0], shape, *h.Dtype, uint64(n)*uint64(size))
	}
	return entry{name: name, dtype: *h.Dtype, shape: shape, begin: int(off[0]), end: int(off[1])}, nil
}

// checkLayout verifies that the byte ranges tile [0, bufLen) exactly.
func checkLayout(entries []entry, bufLen int) error {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b entry) int {
		if a.begin != b.begin {
			return a.begin - b.begin
		}
		return a.end - b.end
	})
	pos := 0
	for _, e := range sorted {
		if e.begin < pos {
			return fmt.Errorf("tensor %q: data_offsets [%d,%d] overlap the previous tensor ending at %d", e.name, e.begin, e.end, pos)
		}
		if e.begin > pos {
			return fmt.Errorf("tensor %q: data_offsets [%d,%d] leave a gap after byte %d", e.name, e.begin, e.end, pos)
		}
		pos = e.end
	}
	if pos != bufLen {
		return fmt.Errorf("data buffer has %d bytes but the tensors cover %d", bufLen, pos)
	}
	return nil
}

// convert decodes little-endian elements of dtype into float32.
func convert(dtype string, b []byte) []float32 {
	le := binary.LittleEndian
	out := make([]float32, len(b)/dtypeSize[dtype])
	switch dtype {
	case "F32":
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
	case "F64":
		for i := range out {
			out[i] = float32(math.Float64frombits(le.Uint64(b[8*i:])))
		}
	case "F16":
		for i := range out {
			out[i] = HalfToFloat32(le.Uint16(b[2*i:]))
		}
	case "BF16":
		for i := range out {
			out[i] = math.Float32frombits(uint32(le.Uint16(b[2*i:])) << 16)
		}
	case "I64":
		for i := range out {
			out[i] = float32(int64(le.Uint64(b[8*i:])))
		}
	case "I32":
		for i := range out {
			out[i] = float32(int32(le.Uint32(b[4*i:])))
		}
	case "I16":
		for i := range out {
			out[i] = float32(int16(le.Uint16(b[2*i:])))
		}
	case "I8":
		for i := range out {
			out[i] = float32(int8(b[i]))
		}
	case "U64":
		for i := range out {
			out[i] = float32(le.Uint64(b[8*i:]))
		}
	case "U32":
		for i := range out {
			out[i] = float32(le.Uint32(b[4*i:]))
		}
	case "U16":
		for i := range out {
			out[i] = float32(le.Uint16(b[2*i:]))
		}
	case "U8":
		for i := range out {
			out[i] = float32(b[i])
		}
	case "BOOL":
		for i := range out {
			if b[i] != 0 {
				out[i] = 1
			}
		}
	default:
		panic("safetensors: convert called with unchecked dtype " + dtype)
	}
	return out
}

// HalfToFloat32 converts an IEEE 754 binary16 value to float32 exactly,
// including subnormals, infinities and NaN.
func HalfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
	case frac == 0: // ±0
		return math.Float32frombits(sign)
	default: // subnormal: frac · 2^-24
		v := float32(frac) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
}
