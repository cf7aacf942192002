package kernels

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// forEachPath runs f once per kernel path this CPU supports (on the C
// backend: avx512, avx2, generic as available; without cgo: go), switching
// the whole package to it, and restores the path in use afterwards.
func forEachPath(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	saved := Path()
	defer func() {
		if err := SetPath(saved); err != nil {
			t.Fatal(err)
		}
	}()
	for _, p := range Paths() {
		if err := SetPath(p); err != nil {
			t.Fatal(err)
		}
		t.Run(p, f)
	}
}

// TestEveryPathMatchesReference runs the package's reference comparisons
// (float32 kernels against the float64 reference, gradients against
// finite differences through the fast forward) on every path the CPU
// supports, so that a plain `go test` checks all of them; CI also runs
// the whole suite once per path (PRISM_KERNELS).
func TestEveryPathMatchesReference(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		for _, tc := range []struct {
			name string
			f    func(*testing.T)
		}{
			{"Sgemm", TestSgemm},
			{"LinearForward", TestLinearForward},
			{"LinearResidualForward", TestLinearResidualForward},
			{"LayerNorm", TestLayerNormMatchesReference},
			{"Modulate", TestModulateMatchesReference},
			{"LayerNormModulate", TestLayerNormModulateMatchesReference},
			{"GELU", TestGELUMatchesReference},
			{"GELUNaNInf", TestGELUPropagatesNaNAndInf},
			{"Bias", TestBiasMatchesReference},
			{"Elementwise", TestElementwise},
			{"Attention", TestAttentionMatchesReference},
			{"AttentionEmptyRow", TestAttentionEmptyRow},
			{"AttentionKVCache", TestAttentionKVCache},
			{"AttentionInference", TestAttentionInferenceMatchesReference},
			{"RAdamRect", TestRAdamRectMatchesReference},
			{"RowsIndependentOfBatch", testRowsIndependentOfBatch},
		} {
			t.Run(tc.name, tc.f)
		}
	})
}

// testRowsIndependentOfBatch: a row's result of the forward kernels
// (products with a row-major A, the fused linear layers, attention of one
// sequence) must not depend on how many rows or sequences share the call,
// bit for bit: inference splits batches into chunks of any size, resumed
// runs may use another --batch, and a fit must not change with either.
func testRowsIndependentOfBatch(t *testing.T) {
	r := newRNG(11)
	const rows = 61
	for _, sh := range []struct{ k, n int }{{64, 64}, {16, 256}, {256, 64}, {300, 100}, {1000, 40}, {7, 3}} {
		x := to32(randn64(r, rows*sh.k, 1))
		w := to32(randn64(r, sh.k*sh.n, 1/math.Sqrt(float64(sh.k))))
		bias := to32(randn64(r, sh.n, 0.1))
		res := to32(randn64(r, rows*sh.n, 1))
		// Each op computes rows [i, i+m) into out.
		type op func(i, m int, out []float32)
		whole := func(f op) []float32 {
			out := make([]float32, rows*sh.n)
			f(0, rows, out)
			return out
		}
		chunked := func(chunk int, f op) []float32 {
			out := make([]float32, rows*sh.n)
			for i := 0; i < rows; i += chunk {
				m := min(chunk, rows-i)
				f(i, m, out[i*sh.n:(i+m)*sh.n])
			}
			return out
		}
		ops := map[string]op{
			"Sgemm": func(i, m int, out []float32) {
				Sgemm(false, false, m, sh.n, sh.k, 1, x[i*sh.k:], sh.k, w, sh.n, 0, out, sh.n)
			},
			"LinearGELU": func(i, m int, out []float32) {
				LinearForward(m, sh.n, sh.k, x[i*sh.k:], sh.k, w, sh.n, bias, out, out)
			},
			"LinearResidual": func(i, m int, out []float32) {
				LinearResidualForward(m, sh.n, sh.k, x[i*sh.k:], sh.k, w, sh.n, bias, res[i*sh.n:(i+m)*sh.n], out)
			},
		}
		for name, f := range ops {
			want := whole(f)
			for _, chunk := range []int{1, 2, 5, 13, 25, 60} {
				if got := chunked(chunk, f); !equalBits(got, want) {
					t.Errorf("%s k=%d n=%d: rows in chunks of %d differ from one call over %d rows", name, sh.k, sh.n, chunk, rows)
				}
			}
		}
	}
	// Attention: each sequence's output alone equals its slice of a batch.
	for _, sh := range []AttnShape{{Tq: 8, Tk: 8, H: 4, Dh: 16}, {Tq: 50, Tk: 10, H: 4, Dh: 16}, {Tq: 3, Tk: 105, H: 2, Dh: 32}} {
		const batch = 9
		d := sh.H * sh.Dh
		q := to32(randn64(r, batch*sh.Tq*d, 1))
		kv := to32(randn64(r, batch*sh.Tk*d, 1))
		s := sh
		s.B = batch
		want := make([]float32, batch*sh.Tq*d)
		AttentionForward(s, q, kv, kv, Mask{}, want, nil)
		s.B = 1
		for b := 0; b < batch; b++ {
			got := make([]float32, sh.Tq*d)
			AttentionForward(s, q[b*sh.Tq*d:(b+1)*sh.Tq*d], kv[b*sh.Tk*d:(b+1)*sh.Tk*d], kv[b*sh.Tk*d:(b+1)*sh.Tk*d], Mask{}, got, nil)
			if !equalBits(got, want[b*sh.Tq*d:(b+1)*sh.Tq*d]) {
				t.Errorf("attention Tq=%d Tk=%d Dh=%d: sequence %d alone differs from its slice of a batch of %d", sh.Tq, sh.Tk, sh.Dh, b, batch)
			}
		}
	}
}

func equalBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func TestSetPathRefusesWhatCannotRun(t *testing.T) {
	saved := Path()
	for _, name := range []string{"avx1024", "", "AVX2 "} {
		if err := SetPath(name); err == nil || !strings.Contains(err.Error(), "unknown") {
			t.Errorf("SetPath(%q) = %v, want an 'unknown' error", name, err)
		}
	}
	if Backend == "c" {
		if err := SetPath(PathGo); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
			t.Errorf("SetPath(go) with cgo = %v, want a hint at CGO_ENABLED=0", err)
		}
	} else if err := SetPath(PathAVX2); err == nil || !strings.Contains(err.Error(), "without cgo") {
		t.Errorf("SetPath(avx2) without cgo = %v, want 'built without cgo'", err)
	}
	if Path() != saved {
		t.Errorf("a refused SetPath changed the path from %s to %s", saved, Path())
	}
	if got := Paths(); len(got) == 0 || got[0] != saved && os.Getenv(PathEnv) == "" {
		t.Errorf("Paths() = %v: the default path %s should be the best supported", got, saved)
	}
}

// TestPathEnvironment runs this test binary again with PRISM_KERNELS set:
// a supported path is used, an unknown or unsupported one ends the process
// with exit status 2 and a message naming the variable, before any kernel
// runs (never an illegal instruction).
func TestPathEnvironment(t *testing.T) {
	if os.Getenv("PRISM_KERNELS_CHILD") != "" {
		fmt.Printf("path=%s\n", Path())
		return
	}
	run := func(value string) (string, int) {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestPathEnvironment$")
		cmd.Env = append(os.Environ(), "PRISM_KERNELS_CHILD=1", PathEnv+"="+value)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	for _, p := range Paths() {
		out, code := run(strings.ToUpper(p))
		if code != 0 || !strings.Contains(out, "path="+p) {
			t.Errorf("%s=%s: exit %d, output %q; want path=%s", PathEnv, p, code, out, p)
		}
	}
	bad := []string{"neon"}
	if Backend == "c" {
		bad = append(bad, PathGo)
		if len(Paths()) < len(allPaths) {
			bad = append(bad, allPaths[0]) // this CPU lacks the best path
		}
	}
	for _, v := range bad {
		out, code := run(v)
		if code != 2 || !strings.Contains(out, PathEnv+"="+v) {
			t.Errorf("%s=%s: exit %d, output %q; want exit 2 and a message naming the setting", PathEnv, v, code, out)
		}
	}
}
