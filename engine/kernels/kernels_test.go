package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// These tests compare the exported float32 kernels (the C kernels when built
// with cgo, the float32 reference otherwise) with the float64 reference on
// the same float32-representable inputs, at sizes large enough to be split
// across workers. Unless stated otherwise the tolerance is relative to the
// largest magnitude of the reference result: float32 has unit roundoff
// u = 6e-8, and a sum of n terms carries at most about n·u relative error
// (√n·u typically); the kernels sum at most a few hundred terms per output,
// and the C exp/tanh approximations are accurate to a few ulp, so 1e-5 for
// per-row quantities and 1e-4 for sums over all rows (dgamma, dbias, ds,
// 600–1000 terms) bound the expected error with a margin of ≥ 5.

func TestLayerNormMatchesReference(t *testing.T) {
	r := newRNG(21)
	const rows, dim = 600, 64
	x := randn64(r, rows*dim, 2)
	for i := range x { // nonzero means, as after residual adds
		x[i] += float64(float32(float64(i%dim) * 0.1))
	}
	gamma, beta, dy := randn64(r, dim, 1), randn64(r, dim, 1), randn64(r, rows*dim, 1)
	for _, affine := range []bool{true, false} {
		g, b := gamma, beta
		if !affine {
			g, b = nil, nil
		}
		y, mean, rstd := make([]float64, rows*dim), make([]float64, rows), make([]float64, rows)
		layerNormFwdRef(x, 0, rows, dim, g, b, 1e-5, y, mean, rstd)
		y32, mean32, rstd32 := make([]float32, rows*dim), make([]float32, rows), make([]float32, rows)
		LayerNormForward(to32(x), rows, dim, to32(g), to32(b), 1e-5, y32, mean32, rstd32)
		checkClose(t, "y", y32, y, 1e-5, maxAbs(y))
		checkClose(t, "mean", mean32, mean, 1e-5, maxAbs(mean))
		checkClose(t, "rstd", rstd32, rstd, 1e-5, maxAbs(rstd))

		dx, dg, db := make([]float64, rows*dim), make([]float64, dim), make([]float64, dim)
		if !affine {
			dg, db = nil, nil
		}
		layerNormBwdRef(dy, x, mean, rstd, g, 0, rows, dim, dx, dg, db)
		dx32, dg32, db32 := make([]float32, rows*dim), make([]float32, dim), make([]float32, dim)
		if !affine {
			dg32, db32 = nil, nil
		}
		LayerNormBackward(to32(dy), to32(x), mean32, rstd32, to32(g), rows, dim, dx32, dg32, db32)
		checkClose(t, "dx", dx32, dx, 1e-5, maxAbs(dx))
		if affine {
			checkClose(t, "dgamma", dg32, dg, 1e-4, maxAbs(dg))
			checkClose(t, "dbeta", db32, db, 1e-4, maxAbs(db))
		}
	}
}

func TestModulateMatchesReference(t *testing.T) {
	r := newRNG(22)
	const b, tt, d = 20, 51, 64
	h, s, c, dy := randn64(r, b*tt*d, 1), randn64(r, b*d, 1), randn64(r, b*d, 1), randn64(r, b*tt*d, 1)
	y := make([]float64, b*tt*d)
	modulateFwdRef(h, s, c, 0, b, tt, d, y)
	y32 := make([]float32, b*tt*d)
	ModulateForward(to32(h), to32(s), to32(c), b, tt, d, y32)
	checkClose(t, "y", y32, y, 1e-5, maxAbs(y))
	dh, ds, dc := make([]float64, b*tt*d), make([]float64, b*d), make([]float64, b*d)
	modulateBwdRef(dy, h, s, 0, b, tt, d, dh, ds, dc)
	dh32, ds32, dc32 := make([]float32, b*tt*d), make([]float32, b*d), make([]float32, b*d)
	ModulateBackward(to32(dy), to32(h), to32(s), b, tt, d, dh32, ds32, dc32)
	checkClose(t, "dh", dh32, dh, 1e-5, maxAbs(dh))
	checkClose(t, "ds", ds32, ds, 1e-5, maxAbs(ds))
	checkClose(t, "dc", dc32, dc, 1e-5, maxAbs(dc))
}

func TestLayerNormModulateMatchesReference(t *testing.T) {
	r := newRNG(23)
	// The network's shape, and a wide one past the C kernels' stack buffers.
	for _, sh := range [][3]int{{20, 51, 64}, {2, 3, 1100}} {
		testLayerNormModulate(t, r, sh[0], sh[1], sh[2])
	}
}

func testLayerNormModulate(t *testing.T, r *rand.Rand, b, tt, d int) {
	x := randn64(r, b*tt*d, 3)
	gamma, beta := randn64(r, d, 1), randn64(r, d, 1)
	s, c, dy := randn64(r, b*d, 1), randn64(r, b*d, 1), randn64(r, b*tt*d, 1)
	y, mean, rstd := make([]float64, b*tt*d), make([]float64, b*tt), make([]float64, b*tt)
	layerNormModFwdRef(x, 0, b, tt, d, gamma, beta, s, c, 1e-6, y, mean, rstd)
	y32, mean32, rstd32 := make([]float32, b*tt*d), make([]float32, b*tt), make([]float32, b*tt)
	LayerNormModulateForward(to32(x), b, tt, d, to32(gamma), to32(beta), to32(s), to32(c), 1e-6, y32, mean32, rstd32)
	checkClose(t, "y", y32, y, 1e-5, maxAbs(y))

	dx, dg, db := make([]float64, b*tt*d), make([]float64, d), make([]float64, d)
	ds, dc := make([]float64, b*d), make([]float64, b*d)
	layerNormModBwdRef(dy, x, mean, rstd, gamma, beta, s, 0, b, tt, d, dx, dg, db, ds, dc, make([]float64, 2*d))
	dx32, dg32, db32 := make([]float32, b*tt*d), make([]float32, d), make([]float32, d)
	ds32, dc32 := make([]float32, b*d), make([]float32, b*d)
	LayerNormModulateBackward(to32(dy), to32(x), mean32, rstd32, to32(gamma), to32(beta), to32(s), b, tt, d, dx32, dg32, db32, ds32, dc32)
	checkClose(t, "dx", dx32, dx, 1e-5, maxAbs(dx))
	checkClose(t, "dgamma", dg32, dg, 1e-4, maxAbs(dg))
	checkClose(t, "dbeta", db32, db, 1e-4, maxAbs(db))
	checkClose(t, "ds", ds32, ds, 1e-5, maxAbs(ds))
	checkClose(t, "dc", dc32, dc, 1e-5, maxAbs(dc))

	// Without parameter gradients and dx only.
	dxOnly := make([]float32, b*tt*d)
	LayerNormModulateBackward(to32(dy), to32(x), mean32, rstd32, to32(gamma), to32(beta), to32(s), b, tt, d, dxOnly, nil, nil, nil, nil)
	checkClose(t, "dx (no param grads)", dxOnly, dx, 1e-5, maxAbs(dx))
}

func TestGELUMatchesReference(t *testing.T) {
	r := newRNG(24)
	const rows, n = 300, 256
	z := randn64(r, rows*n, 3)
	z[0], z[1], z[2], z[3] = 0, 30, -30, 9.5 // saturated tails
	bias, dy := randn64(r, n, 1), randn64(r, rows*n, 1)

	y := make([]float64, rows*n)
	geluFwdRef(z, y)
	y32 := make([]float32, rows*n)
	GELUForward(to32(z), y32)
	// GELU values are O(|x|); the tolerance is relative to 1 + |y|.
	checkClose(t, "gelu", y32, y, 1e-5, 1)
	dx := make([]float64, rows*n)
	geluBwdRef(dy, z, dx)
	dx32 := make([]float32, rows*n)
	GELUBackward(to32(dy), to32(z), dx32)
	checkClose(t, "gelu'", dx32, dx, 1e-5, 1)

	zz := clone64(z)
	biasGELUFwdRef(zz, 0, rows, n, bias, y)
	z32 := to32(z)
	BiasGELUForward(z32, rows, n, to32(bias), y32)
	checkClose(t, "z+bias", z32, zz, 1e-6, 1)
	checkClose(t, "biasgelu", y32, y, 1e-5, 1)
	dz, db := make([]float64, rows*n), make([]float64, n)
	biasGELUBwdRef(dy, zz, 0, rows, n, dz, db)
	dz32, db32 := make([]float32, rows*n), make([]float32, n)
	BiasGELUBackward(to32(dy), z32, rows, n, dz32, db32)
	checkClose(t, "dz", dz32, dz, 1e-5, 1)
	checkClose(t, "dbias", db32, db, 1e-4, maxAbs(db))
}

func TestGELUPropagatesNaNAndInf(t *testing.T) {
	x := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	y := make([]float32, 3)
	GELUForward(x, y)
	if !math.IsNaN(float64(y[0])) || !math.IsInf(float64(y[1]), 1) || y[2] != 0 && !math.IsNaN(float64(y[2])) {
		t.Errorf("GELU(NaN, +Inf, -Inf) = %v", y)
	}
	y = make([]float32, 2)
	LayerNormForward([]float32{1, float32(math.NaN())}, 1, 2, nil, nil, 1e-5, y, nil, nil)
	if !math.IsNaN(float64(y[0])) {
		t.Errorf("LayerNorm of a row with NaN = %v, want NaN", y)
	}
}

func TestBiasMatchesReference(t *testing.T) {
	r := newRNG(25)
	const rows, n = 1000, 64
	y0, bias := randn64(r, rows*n, 1), randn64(r, n, 1)
	y := clone64(y0)
	addBiasRef(y, 0, rows, n, bias)
	y32 := to32(y0)
	AddBias(y32, rows, n, to32(bias))
	checkClose(t, "y", y32, y, 1e-6, 1) // one rounded addition
	db := randn64(r, n, 1)
	db32 := to32(db)
	biasGradRef(y0, 0, rows, n, db)
	BiasGrad(to32(y0), rows, n, db32)
	checkClose(t, "dbias", db32, db, 1e-4, maxAbs(db))
}

func TestElementwise(t *testing.T) {
	r := newRNG(26)
	for _, n := range []int{7, 100_003} { // inline and parallel
		x, y := randn64(r, n, 1), randn64(r, n, 1)
		x32, y32 := to32(x), to32(y)
		Axpy(-0.5, x32, y32)
		want := make([]float64, n)
		for i := range want {
			want[i] = y[i] - 0.5*x[i]
		}
		// Each is one or two correctly rounded operations (FMA or not).
		checkClose(t, "axpy", y32, want, 2e-7, 0)
		dst := make([]float32, n)
		Add(dst, x32, to32(y))
		for i := range want {
			want[i] = x[i] + y[i]
		}
		checkClose(t, "add", dst, want, 1e-7, 0)
		Scale(3, dst)
		for i := range want {
			want[i] *= 3
		}
		checkClose(t, "scale", dst, want, 2e-7, 0)
		Zero(dst)
		for i, v := range dst {
			if v != 0 {
				t.Fatalf("Zero left %g at %d", v, i)
			}
		}
	}
}

func TestSgemm(t *testing.T) {
	r := newRNG(27)
	// Small (one call), and shapes that the cgo Sgemm splits along m, n
	// and k respectively.
	for _, own := range []bool{true, false} { // own kernel and OpenBLAS only (cgo)
		prev := setOwnGemm(own)
		for _, sh := range [][3]int{{37, 29, 45}, {600, 64, 64}, {8, 2000, 64}, {16, 32, 4000}, {3, 1, 2}, {300, 40, 70}} {
			testSgemmShape(t, r, sh[0], sh[1], sh[2])
		}
		setOwnGemm(prev)
	}
	// OpenBLAS's own threading instead of the package's split.
	SetBLASThreads(2)
	testSgemmShape(t, r, 600, 64, 64)
	SetBLASThreads(1)
}

// TestSgemmRowsIndependentOfM checks that a row of a product with a
// row-major A (a layer's forward pass) comes out BIT FOR BIT the same
// whichever rows share the call: the network's outputs for a voxel or an
// observation must not depend on the batch size. Widths cover the
// network's products and bszt's 2,048-wide categorical head (n > 1024,
// once left to OpenBLAS, whose rounding changed with m), with both B
// layouts and the fused bias + GELU epilogue. No tolerance: every path
// (own kernel, pure Go) sums each output over k in one fixed order.
func TestSgemmRowsIndependentOfM(t *testing.T) {
	r := newRNG(31)
	const m = 300
	for _, sh := range [][2]int{{64, 64}, {2048, 128}, {2050, 256}, {1500, 1024}} {
		n, k := sh[0], sh[1]
		a := to32(randn64(r, m*k, 1))
		bias := to32(randn64(r, n, 1))
		for _, tb := range []bool{false, true} {
			w := to32(randn64(r, k*n, 1/math.Sqrt(float64(k))))
			ldb := n
			if tb {
				ldb = k
			}
			whole := make([]float32, m*n)
			Sgemm(false, tb, m, n, k, 1, a, k, w, ldb, 0, whole, n)
			for _, rows := range []int{1, 5, 7, 13, 150} {
				for r0 := 0; r0 < m; r0 += rows {
					r1 := min(m, r0+rows)
					part := make([]float32, (r1-r0)*n)
					Sgemm(false, tb, r1-r0, n, k, 1, a[r0*k:r1*k], k, w, ldb, 0, part, n)
					if i := firstBitDiff(whole[r0*n:r1*n], part); i >= 0 {
						t.Fatalf("Sgemm %d×%d×%d (transB %v) in calls of %d rows: row %d col %d is %v, %v in one call",
							m, n, k, tb, rows, r0+i/n, i%n, part[i], whole[r0*n+i])
					}
				}
			}
			if tb {
				continue // LinearForward's weights are k×n
			}
			z, y := make([]float32, m*n), make([]float32, m*n)
			LinearForward(m, n, k, a, k, w, n, bias, z, y)
			for _, rows := range []int{1, 7, 150} {
				for r0 := 0; r0 < m; r0 += rows {
					r1 := min(m, r0+rows)
					pz, py := make([]float32, (r1-r0)*n), make([]float32, (r1-r0)*n)
					LinearForward(r1-r0, n, k, a[r0*k:r1*k], k, w, n, bias, pz, py)
					if i := firstBitDiff(y[r0*n:r1*n], py); i >= 0 {
						t.Fatalf("LinearForward %d×%d×%d in calls of %d rows: row %d col %d is %v, %v in one call",
							m, n, k, rows, r0+i/n, i%n, py[i], y[r0*n+i])
					}
				}
			}
		}
	}
}

// firstBitDiff returns the first index where a and b differ bit for bit,
// or −1.
func firstBitDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

func testSgemmShape(t *testing.T, r *rand.Rand, m, n, k int) {
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			ar, ac := m, k
			if ta {
				ar, ac = k, m
			}
			br, bc := k, n
			if tb {
				br, bc = n, k
			}
			lda, ldb, ldc := ac+3, bc+1, n+2
			a, b, c := randn64(r, ar*lda, 1), randn64(r, br*ldb, 1), randn64(r, m*ldc, 1)
			want := clone64(c)
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					var s float64
					for p := 0; p < k; p++ {
						var av, bv float64
						if ta {
							av = a[p*lda+i]
						} else {
							av = a[i*lda+p]
						}
						if tb {
							bv = b[j*ldb+p]
						} else {
							bv = b[p*ldb+j]
						}
						s += av * bv
					}
					want[i*ldc+j] = 1.5*s - 0.5*c[i*ldc+j]
				}
			}
			// SgemmRef sums in the same order as the loop above: equal up
			// to the last bits of the final alpha/beta combination.
			c64 := clone64(c)
			SgemmRef(ta, tb, m, n, k, 1.5, a, lda, b, ldb, -0.5, c64, ldc)
			for i := range want {
				if math.Abs(c64[i]-want[i]) > 1e-12*math.Sqrt(float64(k)) {
					t.Fatalf("SgemmRef[%d] = %g, want %g", i, c64[i], want[i])
				}
			}
			c32 := to32(c)
			Sgemm(ta, tb, m, n, k, 1.5, to32(a), lda, to32(b), ldb, -0.5, c32, ldc)
			// Dot products of k unit-variance terms have size ~√k; the
			// rounding errors of the partial sums (size ~√i) add up like a
			// random walk to ≈ u·k/√2 = 1.7e-4 for k = 4000 (less with
			// OpenBLAS's split accumulators), against a tolerance of
			// 1e-5·(√k + |c|) ≥ 6e-4.
			checkClose(t, fmt.Sprintf("C(%d×%d×%d, %v, %v)", m, n, k, ta, tb), c32, want, 1e-5, math.Sqrt(float64(k)))
		}
	}
}

func TestParallelFor(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 1000} {
		hits := make([]int32, n)
		var calls atomic.Int32
		ParallelFor(n, func(lo, hi int) {
			calls.Add(1)
			// Nested calls must not deadlock.
			ParallelFor(hi-lo, func(l2, h2 int) {
				for i := lo + l2; i < lo+h2; i++ {
					atomic.AddInt32(&hits[i], 1)
				}
			})
		})
		for i, h := range hits {
			if h != 1 {
				t.Fatalf("n=%d: index %d visited %d times", n, i, h)
			}
		}
		if n == 0 && calls.Load() != 0 {
			t.Errorf("n=0 called body")
		}
	}
	calls := 0
	ParallelForGrain(100, 1000, func(lo, hi int) {
		calls++ // inline: no race
		if lo != 0 || hi != 100 {
			t.Errorf("small n split into [%d,%d)", lo, hi)
		}
	})
	if calls != 1 {
		t.Errorf("ParallelForGrain below grain ran %d bodies", calls)
	}
}

// TestSgemmInsideParallelFor runs large products from ParallelFor bodies:
// the nested split must neither deadlock nor race (go test -race).
func TestSgemmInsideParallelFor(t *testing.T) {
	r := newRNG(28)
	const m, n, k, jobs = 700, 64, 64, 4
	a, b := to32(randn64(r, jobs*m*k, 1)), to32(randn64(r, k*n, 1))
	got, want := make([]float32, jobs*m*n), make([]float32, jobs*m*n)
	for j := 0; j < jobs; j++ {
		Sgemm(false, false, m, n, k, 1, a[j*m*k:], k, b, n, 0, want[j*m*n:], n)
	}
	ParallelFor(jobs, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			Sgemm(false, false, m, n, k, 1, a[j*m*k:], k, b, n, 0, got[j*m*n:], n)
		}
	})
	// Same kernel on the same rows; only the row split may differ, which
	// does not change any dot product's summation order.
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("C[%d] = %g inside ParallelFor, %g outside", i, got[i], want[i])
		}
	}
}

// TestLinearForward compares the fused linear layer with the float64
// composition SgemmRef + bias (+ GELU), for the own kernel split by rows,
// by columns and serial, and for the unfused path. Outputs are dot products
// of k = 64 unit terms (size ~8), so as in TestSgemm 1e-5·(√k + |z|) bounds
// the float32 error with margin; GELU has slope ≤ 1.13 and adds a few ulp.
func TestLinearForward(t *testing.T) {
	r := newRNG(29)
	for _, own := range []bool{true, false} {
		prev := setOwnGemm(own)
		for _, sh := range [][3]int{{600, 256, 64}, {300, 40, 400}, {100, 64, 400}, {20, 1000, 64}, {5, 7, 3}} {
			m, n, k := sh[0], sh[1], sh[2]
			ldx := k + 2
			x, w := randn64(r, m*ldx, 1), randn64(r, k*n, 1)
			bias := randn64(r, n, 1)
			for _, withBias := range []bool{true, false} {
				for _, withGELU := range []bool{true, false} {
					var b64, y64 []float64
					var b32, y32 []float32
					if withBias {
						b64, b32 = bias, to32(bias)
					}
					z64 := make([]float64, m*n)
					SgemmRef(false, false, m, n, k, 1, x, ldx, w, n, 0, z64, n)
					if withGELU {
						y64, y32 = make([]float64, m*n), make([]float32, m*n)
						BiasGELUForwardRef(z64, m, n, b64, y64)
					} else if withBias {
						AddBiasRef(z64, m, n, b64)
					}
					z32 := make([]float32, m*n)
					LinearForward(m, n, k, to32(x), ldx, to32(w), n, b32, z32, y32)
					name := fmt.Sprintf("%d×%d×%d own=%v bias=%v gelu=%v", m, n, k, own, withBias, withGELU)
					checkClose(t, name+" z", z32, z64, 1e-5, math.Sqrt(float64(k)))
					if withGELU {
						checkClose(t, name+" y", y32, y64, 1e-5, math.Sqrt(float64(k)))
						// In place (y = z): the same activations bit for bit.
						in := make([]float32, m*n)
						LinearForward(m, n, k, to32(x), ldx, to32(w), n, b32, in, in)
						for i := range in {
							if in[i] != y32[i] {
								t.Fatalf("%s: in place %v, separate %v at %d", name, in[i], y32[i], i)
							}
						}
					}
				}
			}
		}
		setOwnGemm(prev)
	}
}

// TestLinearResidualForward compares z = res + x·w + bias with the float64
// composition SgemmRef + bias + res, for the own kernel (tall, short with
// several k blocks, generic) and the unfused path, with the tolerance of
// TestLinearForward (dot products of k unit terms; the residual adds one
// rounding of a value of the same size). It also checks that the fused
// result equals LinearForward followed by Add bit for bit, which the
// engine's inference graph relies on to give the same outputs as the
// training graph.
func TestLinearResidualForward(t *testing.T) {
	r := newRNG(31)
	for _, own := range []bool{true, false} {
		prev := setOwnGemm(own)
		for _, sh := range [][3]int{{600, 64, 64}, {600, 64, 256}, {520, 40, 37}, {100, 64, 400}, {300, 70, 64}, {5, 7, 3}} {
			m, n, k := sh[0], sh[1], sh[2]
			ldx := k + 2
			x, w := randn64(r, m*ldx, 1), randn64(r, k*n, 1)
			bias, res := randn64(r, n, 1), randn64(r, m*n, 4)
			for _, withBias := range []bool{true, false} {
				var b64 []float64
				var b32 []float32
				if withBias {
					b64, b32 = bias, to32(bias)
				}
				z64 := make([]float64, m*n)
				SgemmRef(false, false, m, n, k, 1, x, ldx, w, n, 0, z64, n)
				if withBias {
					AddBiasRef(z64, m, n, b64)
				}
				for i := range z64 {
					z64[i] += res[i]
				}
				z32 := make([]float32, m*n)
				LinearResidualForward(m, n, k, to32(x), ldx, to32(w), n, b32, to32(res), z32)
				name := fmt.Sprintf("%d×%d×%d own=%v bias=%v", m, n, k, own, withBias)
				checkClose(t, name, z32, z64, 1e-5, math.Sqrt(float64(k))+4)

				plain := make([]float32, m*n)
				LinearForward(m, n, k, to32(x), ldx, to32(w), n, b32, plain, nil)
				Add(plain, to32(res), plain)
				for i := range plain {
					if plain[i] != z32[i] {
						t.Fatalf("%s: fused %v, unfused %v at %d", name, z32[i], plain[i], i)
					}
				}
			}
		}
		setOwnGemm(prev)
	}
}
