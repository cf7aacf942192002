package dmri

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestCholeskyTensor(t *testing.T) {
	// z = e_(0,0) + e_(1,1) + e_(2,2) gives L = I, D = (1e-3 + 1e-4) I.
	D := choleskyTensor([]float64{1, 0, 1, 0, 0, 1})
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			want := 0.0
			if i == j {
				want = 1.1e-3
			}
			if math.Abs(D[i][j]-want) > 1e-18 {
				t.Errorf("D[%d][%d] = %g, want %g", i, j, D[i][j], want)
			}
		}
	}
	// A hand-computed case: L = [[1,0,0],[2,3,0],[4,5,6]] ⇒ LLᵀ =
	// [[1,2,4],[2,13,23],[4,23,77]].
	D = choleskyTensor([]float64{1, 2, 3, 4, 5, 6})
	want := [3][3]float64{{1, 2, 4}, {2, 13, 23}, {4, 23, 77}}
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			w := 1e-3 * want[i][j]
			if i == j {
				w += 1e-4
			}
			if math.Abs(D[i][j]-w) > 1e-15 {
				t.Errorf("D[%d][%d] = %g, want %g", i, j, D[i][j], w)
			}
		}
	}

	r := rand.New(rand.NewPCG(12, 13))
	z := make([]float64, 6)
	gz := make([]float64, 6)
	for s := 0; s < 200; s++ {
		for i := range z {
			z[i] = 2 * r.NormFloat64()
		}
		D := choleskyTensor(z)
		sym := mat.NewSymDense(3, nil)
		for i := 0; i < 3; i++ {
			for j := i; j < 3; j++ {
				if D[i][j] != D[j][i] {
					t.Fatalf("D not symmetric: %v", D)
				}
				sym.SetSym(i, j, D[i][j])
			}
		}
		var eig mat.EigenSym
		if !eig.Factorize(sym, false) {
			t.Fatal("eigendecomposition failed")
		}
		// D − 1e-4 I = 1e-3 LLᵀ is PSD, so every eigenvalue is ≥ 1e-4 (up to
		// rounding of the eigen solver, ~1e-16·‖D‖).
		for _, ev := range eig.Values(nil) {
			if ev < 1e-4-1e-15*(1+math.Abs(ev)) {
				t.Errorf("eigenvalue %g < 1e-4 for z = %v", ev, z)
			}
		}
		var gD [3][3]float64
		for i := 0; i < 3; i++ {
			for j := 0; j < 3; j++ {
				gD[i][j] = r.NormFloat64()
			}
		}
		for i := range gz {
			gz[i] = 0
		}
		choleskyTensorVJP(z, gD, gz)
		for i := range z {
			h := 1e-4
			z0 := z[i]
			z[i] = z0 + h
			Dp := choleskyTensor(z)
			z[i] = z0 - h
			Dm := choleskyTensor(z)
			z[i] = z0
			fd := 0.0
			for a := 0; a < 3; a++ {
				for b := 0; b < 3; b++ {
					fd += gD[a][b] * (Dp[a][b] - Dm[a][b]) / (2 * h)
				}
			}
			// D is quadratic in z, so central differences are exact up to
			// rounding (~1e-16·‖D‖/h ≈ 1e-14).
			if math.Abs(gz[i]-fd) > 1e-10 {
				t.Errorf("tensor VJP latent %d: %g, FD %g", i, gz[i], fd)
			}
		}
	}
}

// TestCholeskyTensorDoesNotAllocate: the tensor map runs per sample in
// the likelihood.
func TestCholeskyTensorDoesNotAllocate(t *testing.T) {
	z := []float64{1, 2, 3, 4, 5, 6}
	gz := make([]float64, 6)
	allocs := testing.AllocsPerRun(100, func() {
		D := choleskyTensor(z)
		choleskyTensorVJP(z, D, gz)
	})
	if allocs != 0 {
		t.Errorf("tensor map allocates %v times per call", allocs)
	}
}
