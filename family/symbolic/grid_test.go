package symbolic

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prismsbi/prism/family"
)

// TestGridFastPathMatchesDirect compares the uniform-grid recurrences with
// the per-point evaluation for every base function, at random parameters
// inside the priors, on the task grid and on a grid extended to x < 21 (the
// edge of the fast path, for extrapolation plots). The recurrences restart
// every 32 points, so they drift by ≲ 32·few·ε ≈ 1e-14 relative; 1e-12
// relative (absolute below 1) is asserted.
func TestGridFastPathMatchesDirect(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	long := make([]float64, 2100)
	for j := range long {
		long[j] = float64(j) * GridStep
	}
	for _, x := range [][]float64{Grid(), long} {
		h := uniformStep(x)
		if h != GridStep {
			t.Fatalf("uniformStep = %g, want %g", h, GridStep)
		}
		handled := 0
		fast := make([]float64, len(x))
		direct := make([]float64, len(x))
		for id := 0; id < numBase; id++ {
			for rep := 0; rep < 20; rep++ {
				var c [3]float64
				for p, b := range catalogue[id].Bounds {
					c[p] = b.Lo + (b.Hi-b.Lo)*r.Float64()
				}
				clear(fast)
				clear(direct)
				if !addBasisGrid(id, &c, x, h, fast) {
					break
				}
				if rep == 0 {
					handled++
				}
				addBasis(id, &c, x, direct)
				for j := range x {
					if !closeTo(fast[j], direct[j], 1e-12) {
						t.Fatalf("%s(c=%v) at x=%g: grid %.17g, direct %.17g", catalogue[id].Name, c, x[j], fast[j], direct[j])
					}
				}
			}
		}
		if handled < 20 {
			t.Errorf("only %d functions have a grid path", handled)
		}
	}
}

// TestGridFastPathClosedForm runs the closed-form cases through Forward on
// the task grid (all their abscissae are grid points), i.e. through the fast
// path where one exists.
func TestGridFastPathClosedForm(t *testing.T) {
	f, _ := New(50)
	d := GridDesign()
	out := make([]float64, d.N)
	for _, tc := range baseCases {
		id := idByName(t, tc.name)
		k := -1
		for i, cid := range f.ids {
			if cid == id {
				k = i
				break
			}
		}
		noise := f.k
		mask := maskOf(f, k, noise)
		theta, err := f.Latent(family.Params{Components: map[int]map[string]float64{
			k: paramsFor(tc.c...), noise: paramsFor(1)}}, mask)
		if err != nil {
			t.Fatal(err)
		}
		f.Forward(d, theta, mask, out)
		for _, p := range tc.xy {
			j := int(math.Round(p[0] / GridStep))
			if kinkAt(id, tc.c, p[0]) {
				continue // x_j differs from the literal by an ulp: the branch may differ
			}
			// Parameters pass through Φ⁻¹ and Φ (≈ 1e-15 relative) on top
			// of the closed-form tolerance.
			if !closeTo(out[j], p[1], closedFormTol) {
				t.Errorf("%s(x=%g) on the grid = %.17g, want %.17g", tc.name, p[0], out[j], p[1])
			}
		}
	}
}

// kinkAt reports whether x sits exactly on a branch point of a piecewise case.
func kinkAt(id int, c []float64, x float64) bool {
	switch id {
	case idRampUp, idRampDown, idRectifiedLinear, idAbsoluteValue, idTriangularBump:
		return x == c[1]
	}
	return false
}

func TestUniformStep(t *testing.T) {
	if h := uniformStep([]float64{0, 0.1, 0.3}); h != 0 {
		t.Errorf("non-uniform grid gave step %g", h)
	}
	if h := uniformStep([]float64{0, 30}); h != 0 {
		t.Errorf("grid beyond the fast-path range gave step %g", h)
	}
	if h := uniformStep([]float64{5}); h != 0 {
		t.Errorf("single point gave step %g", h)
	}
}
