package safetensors

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// handMadeFile is a safetensors file written out byte by byte, independent of
// the encoder: the header is JSON with metadata, tensors of five dtypes whose
// data lie in the buffer in a different order than their names, and one space
// of padding (327 JSON bytes → 328 = 0x148).
func handMadeFile() []byte {
	var f []byte
	f = append(f, 0x48, 0x01, 0, 0, 0, 0, 0, 0)
	f = append(f, `{"__metadata__":{"format":"pt","note":"hand-made"},`+
		`"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},`+
		`"b":{"dtype":"F16","shape":[1,4],"data_offsets":[0,8]},`+
		`"c":{"dtype":"BF16","shape":[],"data_offsets":[32,34]},`+
		`"d":{"dtype":"F64","shape":[1],"data_offsets":[16,24]},`+
		`"e":{"dtype":"I32","shape":[2,1],"data_offsets":[24,32]}} `...)
	f = append(f,
		0x00, 0x3c, 0x00, 0xb8, 0x01, 0x00, 0x00, 0x7c, // b: F16 1, -0.5, 2^-24 (subnormal), +Inf
		0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0, // a: F32 1, -2.5
		0x9a, 0x99, 0x99, 0x99, 0x99, 0x99, 0xb9, 0x3f, // d: F64 0.1
		0xf9, 0xff, 0xff, 0xff, 0x2c, 0x01, 0x00, 0x00, // e: I32 -7, 300
		0x40, 0x40, // c: BF16 3
	)
	return f
}

func TestDecodeHandMade(t *testing.T) {
	ts, meta, err := Decode(handMadeFile())
	if err != nil {
		t.Fatal(err)
	}
	want := []Tensor{
		{"a", []int{2}, []float32{1, -2.5}},
		{"b", []int{1, 4}, []float32{1, -0.5, 1.0 / (1 << 24), float32(math.Inf(1))}},
		{"c", []int{}, []float32{3}},
		{"d", []int{1}, []float32{0.1}},
		{"e", []int{2, 1}, []float32{-7, 300}},
	}
	if !reflect.DeepEqual(ts, want) {
		t.Errorf("tensors:\n got %v\nwant %v", ts, want)
	}
	if wantMeta := map[string]string{"format": "pt", "note": "hand-made"}; !reflect.DeepEqual(meta, wantMeta) {
		t.Errorf("metadata = %v, want %v", meta, wantMeta)
	}
}

// TestEncodeGolden pins the exact bytes the encoder produces: metadata first,
// tensors in name order, compact JSON, space padding to a multiple of 8.
func TestEncodeGolden(t *testing.T) {
	var got bytes.Buffer
	err := Encode(&got, []Tensor{
		{"w", []int{2, 2}, []float32{1, 2, 3, 4}},
		{"b", []int{1}, []float32{-1}},
	}, map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	// The checksum is the SHA-256 of the 20 data bytes below, computed
	// independently: python3 -c "import hashlib, struct;
	// print(hashlib.sha256(struct.pack('<5f', -1, 1, 2, 3, 4)).hexdigest())".
	want = append(want, 0xe0, 0, 0, 0, 0, 0, 0, 0) // 222 JSON bytes + 2 spaces = 224
	want = append(want, `{"__metadata__":{"k":"v","prism.data_sha256":"6fac21fa52075856a644c360281c6d2dcac6ed3acfb372da6a0509620758ba6d"},`+
		`"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},`+
		`"w":{"dtype":"F32","shape":[2,2],"data_offsets":[4,20]}}  `...)
	want = append(want,
		0x00, 0x00, 0x80, 0xbf, // b: -1
		0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x40, 0x40, 0x00, 0x00, 0x80, 0x40, // w: 1 2 3 4
	)
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("encoding:\n got %q\nwant %q", got.Bytes(), want)
	}
}

func randomTensors(r *rand.Rand) []Tensor {
	shapes := [][]int{{}, {3}, {0}, {2, 3}, {4, 0, 2}, {2, 3, 4}, {1, 1, 1, 5}}
	var ts []Tensor
	for i, s := range shapes {
		n, _ := NumElements(s)
		d := make([]float32, n)
		for j := range d {
			d[j] = float32(r.NormFloat64())
		}
		ts = append(ts, Tensor{Name: "t" + strings.Repeat("x", 5-i%5) + string(rune('a'+i)), Shape: s, Data: d})
	}
	// Special values must survive bit-exactly.
	ts = append(ts, Tensor{"special", []int{5}, []float32{float32(math.Inf(-1)), float32(math.NaN()), float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, math.MaxFloat32}})
	return ts
}

func sameTensors(t *testing.T, got, want []Tensor) {
	t.Helper()
	byName := make(map[string]Tensor)
	for _, w := range want {
		byName[w.Name] = w
	}
	if len(got) != len(want) {
		t.Fatalf("got %d tensors, want %d", len(got), len(want))
	}
	for i, g := range got {
		if i > 0 && got[i-1].Name >= g.Name {
			t.Errorf("tensors not in name order: %q before %q", got[i-1].Name, g.Name)
		}
		w, ok := byName[g.Name]
		if !ok {
			t.Fatalf("unexpected tensor %q", g.Name)
		}
		if len(g.Shape) != len(w.Shape) || (len(g.Shape) > 0 && !reflect.DeepEqual(g.Shape, w.Shape)) {
			t.Errorf("%s: shape %v, want %v", g.Name, g.Shape, w.Shape)
		}
		if len(g.Data) != len(w.Data) {
			t.Fatalf("%s: %d elements, want %d", g.Name, len(g.Data), len(w.Data))
		}
		for j := range g.Data {
			if math.Float32bits(g.Data[j]) != math.Float32bits(w.Data[j]) {
				t.Errorf("%s[%d] = %v, want %v", g.Name, j, g.Data[j], w.Data[j])
			}
		}
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ts := randomTensors(r)
	meta := map[string]string{"prism.format_version": "1", "quote\"and\\slash": "ünïcode\n"}
	dir := t.TempDir()
	path := filepath.Join(dir, "ckpt.safetensors")
	if err := Write(path, ts, meta); err != nil {
		t.Fatal(err)
	}
	got, gotMeta, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	sameTensors(t, got, ts)
	if !reflect.DeepEqual(gotMeta, meta) {
		t.Errorf("metadata = %v, want %v", gotMeta, meta)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := binary.LittleEndian.Uint64(raw); n%8 != 0 {
		t.Errorf("header length %d is not a multiple of 8", n)
	}

	// Same content in another order and another map ⇒ identical bytes.
	rev := make([]Tensor, len(ts))
	for i := range ts {
		rev[len(ts)-1-i] = ts[i]
	}
	meta2 := make(map[string]string)
	for k, v := range meta {
		meta2[k] = v
	}
	path2 := filepath.Join(dir, "ckpt2.safetensors")
	if err := Write(path2, rev, meta2); err != nil {
		t.Fatal(err)
	}
	raw2, err := os.ReadFile(path2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, raw2) {
		t.Error("same content written twice gave different bytes")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("directory holds %d entries, want the 2 files only (temporary file left behind?)", len(entries))
	}
}

func TestWriteFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ckpt.safetensors")
	good := []Tensor{{"x", []int{2}, []float32{1, 2}}}
	if err := Write(path, good, nil); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(path)
	bad := []Tensor{{"x", []int{3}, []float32{1, 2}}}
	err := Write(path, bad, nil)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Write with inconsistent shape: err = %v, want an error naming %s", err, path)
	}
	now, _ := os.ReadFile(path)
	if !bytes.Equal(old, now) {
		t.Error("failed Write changed the existing file")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("failed Write left %d entries in the directory, want 1", len(entries))
	}
	if err := Write(filepath.Join(dir, "no-such-dir", "f.safetensors"), good, nil); err == nil {
		t.Error("Write into a missing directory succeeded")
	}
}

func TestEncodeRejects(t *testing.T) {
	cases := map[string][]Tensor{
		"duplicate":  {{"a", []int{1}, []float32{1}}, {"a", []int{1}, []float32{2}}},
		"empty name": {{"", []int{1}, []float32{1}}},
		"reserved":   {{MetadataKey, []int{1}, []float32{1}}},
		"negative":   {{"a", []int{-1}, nil}},
		"mismatch":   {{"a", []int{2, 2}, []float32{1, 2, 3}}},
	}
	for name, ts := range cases {
		if err := Encode(&bytes.Buffer{}, ts, nil); err == nil {
			t.Errorf("%s: Encode succeeded", name)
		}
	}
}

// build assembles a file from a raw header and data buffer with a correct
// length field, for the rejection tests.
func build(header string, data []byte) []byte {
	f := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(f, header...), data...)
}

func TestDecodeRejects(t *testing.T) {
	f32 := `{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`
	cases := []struct {
		name string
		file []byte
		want string // substring of the error
	}{
		{"short", []byte{1, 2, 3}, "too short"},
		{"header beyond file", append(binary.LittleEndian.AppendUint64(nil, 100), "{}"...), "exceeds"},
		{"huge header length", binary.LittleEndian.AppendUint64(nil, 1<<62), "exceeds"},
		{"invalid json", build(`{"a":`, nil), "not valid JSON"},
		{"not object", build(`[1,2]`, nil), "not a JSON object"},
		{"trailing garbage", build(`{} x`, nil), "not valid JSON"},
		{"bad utf8", build("{\"\xff\":1}", nil), "UTF-8"},
		{"duplicate", build(`{"a":`+f32+`,"a":`+f32+`}`, make([]byte, 8)), "duplicate"},
		{"unknown dtype", build(`{"a":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}}`, make([]byte, 2)), "unsupported dtype"},
		{"negative dim", build(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, make([]byte, 8)), "negative"},
		{"fractional dim", build(`{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,8]}}`, make([]byte, 8)), "tensor \"a\""},
		{"missing dtype", build(`{"a":{"shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)), "missing dtype"},
		{"missing shape", build(`{"a":{"dtype":"F32","data_offsets":[0,8]}}`, make([]byte, 8)), "missing shape"},
		{"missing offsets", build(`{"a":{"dtype":"F32","shape":[2]}}`, make([]byte, 8)), "missing data_offsets"},
		{"three offsets", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}}`, make([]byte, 8)), "want 2"},
		{"reversed offsets", build(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, make([]byte, 8)), "invalid data_offsets"},
		{"size mismatch", build(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, make([]byte, 8)), "needs 12"},
		{"beyond buffer", build(`{"a":`+f32+`}`, make([]byte, 4)), "beyond"},
		{"overlap", build(`{"a":`+f32+`,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, make([]byte, 12)), "overlap"},
		{"gap", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)), "gap"},
		{"trailing bytes", build(`{"a":`+f32+`}`, make([]byte, 12)), "cover 8"},
		{"overflowing shape", build(`{"a":{"dtype":"F32","shape":[2147483647,2147483647,2147483647],"data_offsets":[0,8]}}`, make([]byte, 8)), "too large"},
		{"metadata not object", build(`{"__metadata__":[1]}`, nil), "not an object"},
		{"metadata not string", build(`{"__metadata__":{"a":1}}`, nil), "not a string"},
		{"metadata duplicate", build(`{"__metadata__":{"a":"1","a":"2"}}`, nil), "duplicate"},
	}
	for _, c := range cases {
		_, _, err := Decode(c.file)
		if err == nil {
			t.Errorf("%s: Decode succeeded", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not mention %q", c.name, err, c.want)
		}
	}
}

func TestReadErrorNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broken.safetensors")
	if err := os.WriteFile(path, build(`{"a":1}`, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := Read(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Read of a corrupt file: err = %v, want an error naming %s", err, path)
	}
}

func TestDecodeDtypes(t *testing.T) {
	// Each case: one tensor of the dtype with explicit little-endian bytes.
	cases := []struct {
		dtype string
		data  []byte
		want  []float32
	}{
		{"F64", []byte{0, 0, 0, 0, 0, 0, 0xf0, 0xbf}, []float32{-1}},
		{"BF16", []byte{0xc0, 0xbf, 0x80, 0x7f}, []float32{-1.5, float32(math.Inf(1))}},
		{"I64", []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []float32{-2}},
		{"I16", []byte{0x00, 0x80}, []float32{-32768}},
		{"I8", []byte{0x81}, []float32{-127}},
		{"U64", []byte{5, 0, 0, 0, 0, 0, 0, 0}, []float32{5}},
		{"U32", []byte{0xff, 0xff, 0xff, 0xff}, []float32{4294967295}},
		{"U16", []byte{0xff, 0xff}, []float32{65535}},
		{"U8", []byte{200}, []float32{200}},
		{"BOOL", []byte{0, 1}, []float32{0, 1}},
	}
	for _, c := range cases {
		n := len(c.want)
		h := `{"x":{"dtype":"` + c.dtype + `","shape":[` + string(rune('0'+n)) + `],"data_offsets":[0,` + string(rune('0'+len(c.data))) + `]}}`
		ts, _, err := Decode(build(h, c.data))
		if err != nil {
			t.Errorf("%s: %v", c.dtype, err)
			continue
		}
		if !reflect.DeepEqual(ts[0].Data, c.want) {
			t.Errorf("%s: got %v, want %v", c.dtype, ts[0].Data, c.want)
		}
	}
}

// TestHalfToFloat32 checks every binary16 value against the definition
// value = (-1)^s · 2^(e-15) · (1 + f/1024) (normal) or 2^-14 · f/1024
// (subnormal), computed in float64 where all of them are exact.
func TestHalfToFloat32(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		s, e, f := h>>15, (h>>10)&0x1f, h&0x3ff
		var want float64
		switch {
		case e == 0x1f && f == 0:
			want = math.Inf(1)
		case e == 0x1f:
			want = math.NaN()
		case e == 0:
			want = math.Ldexp(float64(f)/1024, -14)
		default:
			want = math.Ldexp(1+float64(f)/1024, e-15)
		}
		if s == 1 {
			want = -want
		}
		got := HalfToFloat32(uint16(h))
		if math.IsNaN(want) {
			if !math.IsNaN(float64(got)) {
				t.Errorf("%#04x: got %v, want NaN", h, got)
			}
			continue
		}
		if float64(got) != want || math.Signbit(float64(got)) != (s == 1) {
			t.Errorf("%#04x: got %v, want %v", h, got, want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(handMadeFile())
	var b bytes.Buffer
	if err := Encode(&b, randomTensors(rand.New(rand.NewPCG(3, 4))), map[string]string{"a": "b"}); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add(build(`{}`, nil))
	f.Add(build(`{"a":{"dtype":"F16","shape":[2,1],"data_offsets":[0,4]}}`, []byte{0, 0x3c, 0, 0xbc}))
	f.Add(build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, make([]byte, 8)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, meta, err := Decode(data)
		if err != nil {
			return
		}
		// Anything accepted must re-encode (as F32) and decode to the same values.
		var b bytes.Buffer
		if err := Encode(&b, ts, meta); err != nil {
			t.Fatalf("decoded tensors do not re-encode: %v", err)
		}
		ts2, meta2, err := Decode(b.Bytes())
		if err != nil {
			t.Fatalf("re-encoded file does not decode: %v", err)
		}
		sameTensors(t, ts2, ts)
		if len(meta) != len(meta2) {
			t.Fatalf("metadata changed: %v vs %v", meta, meta2)
		}
		for k, v := range meta {
			if meta2[k] != v {
				t.Fatalf("metadata[%q] = %q after round trip, want %q", k, meta2[k], v)
			}
		}
	})
}

// TestChecksum: the recorded SHA-256 catches a flipped bit anywhere in the
// data (even one that leaves a finite number), a file without a checksum
// loads with a warning naming it, and the key is reserved.
func TestChecksum(t *testing.T) {
	ts := randomTensors(rand.New(rand.NewPCG(5, 6)))
	special := ts[len(ts)-1].Data
	if math.Float32bits(special[2]) != 0x80000000 {
		t.Fatalf("the negative-zero entry has bits %#x, want 0x80000000", math.Float32bits(special[2]))
	}
	var buf bytes.Buffer
	if err := Encode(&buf, ts, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	hlen := int(binary.LittleEndian.Uint64(good))
	noSum := func() []byte {
		// The same tensors with a hand-written header without the checksum.
		var b bytes.Buffer
		if err := encodeNoChecksum(&b, ts); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}()
	flip := func(off int, bit uint) []byte {
		b := bytes.Clone(good)
		b[off] ^= 1 << bit
		return b
	}
	for _, tc := range []struct {
		name    string
		data    []byte
		wantErr string
		warn    bool
	}{
		{"intact", good, "", false},
		{"first data byte, lowest mantissa bit", flip(8+hlen, 0), "do not match their checksum", false},
		{"last data byte, sign bit", flip(len(good)-1, 7), "do not match their checksum", false},
		{"no checksum (older file)", noSum, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "w.safetensors")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			var warn bytes.Buffer
			old := Warnings
			Warnings = &warn
			defer func() { Warnings = old }()
			got, meta, err := Read(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err = %v, want one naming %s and containing %q", err, path, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sameTensors(t, got, ts)
			if _, ok := meta[ChecksumKey]; ok {
				t.Errorf("metadata still holds %s", ChecksumKey)
			}
			if w := warn.String(); (w != "") != tc.warn || (tc.warn && !strings.Contains(w, path)) {
				t.Errorf("warning %q, want one naming the file: %v", w, tc.warn)
			}
		})
	}
	if err := Encode(io.Discard, ts, map[string]string{ChecksumKey: "x"}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("reserved metadata key: err = %v", err)
	}
}

// encodeNoChecksum writes tensors as a file without a checksum, as prism
// wrote them before it recorded one.
func encodeNoChecksum(w io.Writer, tensors []Tensor) error {
	order, err := checkTensors(tensors)
	if err != nil {
		return err
	}
	header, err := buildHeader(tensors, order, nil)
	if err != nil {
		return err
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(header)))
	w.Write(lenBuf[:])
	w.Write(header)
	return writeData(w, tensors, order)
}
