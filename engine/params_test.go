package engine

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prismsbi/prism/engine/optim"
	"github.com/prismsbi/prism/engine/safetensors"
)

// TestVarianceScaling checks the truncated-normal initialiser's variance
// and support. With n = 120000 samples the sample variance has relative
// standard error √(2/n) ≈ 0.4 % (slightly less for the truncated normal,
// whose kurtosis is below 3), so 2 % is five standard errors.
func TestVarianceScaling(t *testing.T) {
	const fanIn, fanOut, scale = 400, 300, 0.5
	s := NewParamStore(rand.New(rand.NewPCG(40, 1)))
	w := s.New("w", VarianceScaling(scale), fanIn, fanOut)
	want := scale / fanIn
	var m, v float64
	for _, x := range w.Data {
		m += float64(x)
	}
	m /= float64(len(w.Data))
	bound := 2 * math.Sqrt(want) / truncNormStd
	for _, x := range w.Data {
		v += (float64(x) - m) * (float64(x) - m)
		if math.Abs(float64(x)) > bound*(1+1e-6) {
			t.Fatalf("sample %v outside the truncation bound %v", x, bound)
		}
	}
	v /= float64(len(w.Data) - 1)
	if math.Abs(v/want-1) > 0.02 {
		t.Errorf("variance %v, want %v", v, want)
	}
	if math.Abs(m) > 5*math.Sqrt(want/float64(len(w.Data))) {
		t.Errorf("mean %v, want 0", m)
	}
	if FanIn([]int{3, 4, 5}) != 12 || FanIn([]int{7}) != 7 {
		t.Error("FanIn")
	}
}

func TestParamStoreNamesAndInit(t *testing.T) {
	mk := func() *ParamStore {
		s := NewParamStore(rand.New(rand.NewPCG(41, 1)))
		dec := s.Scope("dec")
		dec.Subf("layer%d", 3).Sub("attn").New("wq", VarianceScaling(1), 4, 4)
		dec.New("head.w", Zeros, 4, 1)
		dec.New("ln.scale", Ones, 4)
		s.New("fourier", Normal(1), 32, 1)
		return s
	}
	s := mk()
	var names []string
	for _, p := range s.All() {
		names = append(names, p.Name)
	}
	if got := strings.Join(names, ","); got != "dec.layer3.attn.wq,dec.head.w,dec.ln.scale,fourier" {
		t.Fatalf("names %s", got)
	}
	if s.NumValues() != 16+4+4+32 {
		t.Errorf("NumValues %d", s.NumValues())
	}
	for _, v := range s.Get("dec.head.w").Data {
		if v != 0 {
			t.Fatal("Zeros")
		}
	}
	for _, v := range s.Get("dec.ln.scale").Data {
		if v != 1 {
			t.Fatal("Ones")
		}
	}
	// Same seed, same values.
	a, b := s.Get("fourier").Data, mk().Get("fourier").Data
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("initialisation not reproducible")
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("duplicate name did not panic")
		}
	}()
	s.New("fourier", Zeros, 1)
}

// TestSaveLoadParams: parameters written to a safetensors file and read
// back through Assign are identical; a file whose names or shapes do not
// match the store is refused without changing it.
func TestSaveLoadParams(t *testing.T) {
	SaveParams := func(path string, s *ParamStore, meta map[string]string) error {
		return safetensors.Write(path, s.Tensors(), meta)
	}
	LoadParams := func(path string, s *ParamStore) (map[string]string, error) {
		ts, meta, err := safetensors.Read(path)
		if err != nil {
			return nil, err
		}
		return meta, s.Assign(ts, "")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "p.safetensors")
	mk := func(seed uint64, shape ...int) *ParamStore {
		s := NewParamStore(rand.New(rand.NewPCG(seed, 1)))
		s.New("a.w", Normal(1), 3, 2)
		s.New("a.b", Normal(1), shape...)
		return s
	}
	src := mk(42, 2)
	if err := SaveParams(path, src, map[string]string{"model": "test"}); err != nil {
		t.Fatal(err)
	}
	dst := mk(43, 2)
	meta, err := LoadParams(path, dst)
	if err != nil {
		t.Fatal(err)
	}
	if meta["model"] != "test" {
		t.Errorf("metadata %v", meta)
	}
	for i, p := range src.All() {
		for j, v := range p.Data {
			if dst.All()[i].Data[j] != v {
				t.Fatalf("%s[%d] = %v after load, want %v", p.Name, j, dst.All()[i].Data[j], v)
			}
		}
	}
	// Wrong shape, missing and unknown parameters are all reported and
	// nothing is modified.
	bad := mk(44, 3)
	before := append([]float32(nil), bad.Get("a.w").Data...)
	if _, err := LoadParams(path, bad); err == nil || !strings.Contains(err.Error(), `"a.b" has shape [2]`) {
		t.Errorf("shape mismatch error: %v", err)
	}
	if bad.Get("a.w").Data[0] != before[0] {
		t.Error("failed load modified the store")
	}
	other := NewParamStore(rand.New(rand.NewPCG(45, 1)))
	other.New("a.w", Zeros, 3, 2)
	other.New("c", Zeros, 1)
	_, err = LoadParams(path, other)
	if err == nil || !strings.Contains(err.Error(), `missing parameter "c"`) || !strings.Contains(err.Error(), `unknown parameter "a.b"`) {
		t.Errorf("name mismatch error: %v", err)
	}
	if _, err := LoadParams(filepath.Join(dir, "none"), other); err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("missing file error: %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

// TestTrainsWithOptim fits a tiny regression through the whole stack (graph,
// tape, parameter store, optimiser) and requires the loss to drop by 10×:
// a sign or wiring error anywhere would make it rise or stall.
func TestTrainsWithOptim(t *testing.T) {
	r := rand.New(rand.NewPCG(46, 1))
	s := NewParamStore(r)
	w1, b1 := s.New("l1.w", VarianceScaling(1), 2, 16), s.New("l1.b", Zeros, 16)
	w2, b2 := s.New("l2.w", VarianceScaling(1), 16, 1), s.New("l2.b", Zeros, 1)
	cfg := optim.DefaultConfig()
	cfg.LR = 1e-2
	opt, err := optim.New(s.OptimParams(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Close()
	const n = 64
	x, y := make([]float32, 2*n), make([]float32, n)
	for i := range n {
		x[2*i], x[2*i+1] = float32(r.NormFloat64()), float32(r.NormFloat64())
		y[i] = float32(math.Sin(float64(x[2*i])) + 0.5*float64(x[2*i+1]))
	}
	g := NewGraph()
	var first, last float32
	for step := range 300 {
		g.Reset()
		pred := g.Linear(g.LinearGELU(g.Input(x, n, 2), w1, b1), w2, b2)
		loss := g.Scale(g.MaskedSquaredError(pred, g.Input(y, n, 1), nil), 1.0/n)
		s.ZeroGrad()
		g.Backward(loss)
		if err := opt.Step(); err != nil {
			t.Fatal(err)
		}
		if step == 0 {
			first = loss.Item()
		}
		last = loss.Item()
	}
	if !(last < first/10) {
		t.Errorf("loss %v → %v, want a 10× drop", first, last)
	}
}
