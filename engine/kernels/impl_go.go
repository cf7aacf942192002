//go:build !cgo

package kernels

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Without cgo every kernel is the float32 instance of the reference code in
// ref.go, and Sgemm is gonum's pure-Go BLAS.

// Backend names the implementation in use: "go" (pure Go, gonum BLAS) or "c"
// (C kernels and OpenBLAS through cgo).
const Backend = "go"

var gonumBLAS gonum.Implementation

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// Sgemm computes the row-major C = alpha·op(A)·op(B) + beta·C with op(A)
// m×k and op(B) k×n; op transposes when transA/transB is set. lda, ldb and
// ldc are the row strides of A, B and C as stored.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkGemm(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	gonumBLAS.Sgemm(trans(transA), trans(transB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SetBLASThreads is a no-op without cgo: gonum's Sgemm parallelises over
// GOMAXPROCS goroutines by itself.
func SetBLASThreads(n int) {}

// linearFused has no fused path without cgo: LinearForward composes Sgemm,
// AddBias and BiasGELUForward.
func linearFused(m, n, k int, x []float32, ldx int, w []float32, ldw int, bias, res, z, y []float32) bool {
	return false
}

func addBiasImpl(y []float32, lo, hi, n int, bias []float32) { addBiasRef(y, lo, hi, n, bias) }

func biasGradImpl(dy []float32, lo, hi, n int, dbias []float32) { biasGradRef(dy, lo, hi, n, dbias) }

func lnFwdImpl(x []float32, lo, hi, dim int, gamma, beta []float32, eps float32, y, mean, rstd []float32) {
	layerNormFwdRef(x, lo, hi, dim, gamma, beta, eps, y, mean, rstd)
}

func lnBwdImpl(dy, x, mean, rstd, gamma []float32, lo, hi, dim int, dx, dgamma, dbeta []float32) {
	layerNormBwdRef(dy, x, mean, rstd, gamma, lo, hi, dim, dx, dgamma, dbeta)
}

func modFwdImpl(h, s, c []float32, lo, hi, t, d int, y []float32) {
	modulateFwdRef(h, s, c, lo, hi, t, d, y)
}

func modBwdImpl(dy, h, s []float32, lo, hi, t, d int, dh, ds, dc []float32) {
	modulateBwdRef(dy, h, s, lo, hi, t, d, dh, ds, dc)
}

func lnModFwdImpl(x []float32, lo, hi, t, d int, gamma, beta, s, c []float32, eps float32, y, mean, rstd []float32) {
	layerNormModFwdRef(x, lo, hi, t, d, gamma, beta, s, c, eps, y, mean, rstd)
}

func lnModBwdImpl(dy, x, mean, rstd, gamma, beta, s []float32, lo, hi, t, d int, dx, dgamma, dbeta, ds, dc, scratch []float32) {
	layerNormModBwdRef(dy, x, mean, rstd, gamma, beta, s, lo, hi, t, d, dx, dgamma, dbeta, ds, dc, scratch)
}

func geluFwdImpl(x, y []float32) { geluFwdRef(x, y) }

func geluBwdImpl(dy, x, dx []float32) { geluBwdRef(dy, x, dx) }

func biasGELUFwdImpl(z []float32, lo, hi, n int, bias, y []float32) {
	biasGELUFwdRef(z, lo, hi, n, bias, y)
}

func biasGELUBwdImpl(dy, z []float32, lo, hi, n int, dz, dbias []float32) {
	biasGELUBwdRef(dy, z, lo, hi, n, dz, dbias)
}

func attnFwdImpl(s AttnShape, q, k, v []float32, m Mask, out, probs []float32, lo, hi int) {
	var sc *[]float32
	var scratch []float32
	if probs == nil {
		sc = getScratch(s.Tk)
		scratch = *sc
	}
	attnFwdRef(s, q, k, v, m, out, probs, lo, hi, scratch)
	if sc != nil {
		putScratch(sc)
	}
}

func attnBwdImpl(s AttnShape, q, k, v, probs, out, dout []float32, _ Mask, lo, hi int, dq, dk, dv []float32) {
	attnBwdRef(s, q, k, v, probs, out, dout, lo, hi, dq, dk, dv)
}

func axpyImpl(alpha float32, x, y []float32) { gonumBLAS.Saxpy(len(x), alpha, x, 1, y, 1) }

func addImpl(dst, a, b []float32) {
	for i := range dst {
		dst[i] = a[i] + b[i]
	}
}

func scaleImpl(alpha float32, x []float32) {
	for i := range x {
		x[i] *= alpha
	}
}

func radamRectImpl(scale []float64, u0 int, grad, val, m, v, ema []float32, k *RAdamScalars) {
	radamRectRef(scale, u0, grad, val, m, v, ema, k)
}

func sumSquares2Impl(g, w []float32, gacc, wacc []float64, u0 int) {
	sumSquares2Ref(g, w, gacc, wacc, u0)
}
