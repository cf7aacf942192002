//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3 -fopenmp-simd -std=gnu11
#cgo LDFLAGS: -lopenblas -lm
#include <cblas.h>
#include "kernels.h"
*/
import "C"

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// With cgo the kernels are the C code in kernels.c (one cgo call per
// goroutine's range) and Sgemm is OpenBLAS.

// Backend names the implementation in use: "go" (pure Go, gonum BLAS) or "c"
// (C kernels and OpenBLAS through cgo).
const Backend = "c"

// Sgemm computes the row-major C = alpha·op(A)·op(B) + beta·C with op(A)
// m×k and op(B) k×n; op transposes when transA/transB is set. lda, ldb and
// ldc are the row strides of A, B and C as stored.
//
// Each worker's piece runs on the package's own kernel for the kernel path
// in use when it fits the product (see ownGemmFits: the network's shapes)
// and on single-threaded OpenBLAS otherwise. Sgemm splits the product over
// the package's workers itself (see the package documentation), along m, n
// or k — whichever makes each worker read the least memory; a k split sums
// the workers' partial products, and is taken only for a transposed A
// (weight gradients, sums over the batch), so that a row of a forward
// product never depends on how the work was cut.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkGemm(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	initBLAS()
	g := gemmArgs{transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc}
	p := procs()
	if blasThreads.Load() > 1 || p == 1 || float64(m)*float64(n)*float64(k) < gemmSerialMACs {
		g.call()
		return
	}
	// Elements each worker reads (and, for a k split, the partial sums it
	// writes) for each way of splitting.
	fm, fn, fk, fp := float64(m), float64(n), float64(k), float64(p)
	costM := fm*fk/fp + fk*fn
	costN := fm*fk + fk*fn/fp
	costK := (fm*fk+fk*fn)/fp + 2*fm*fn
	j := gemmJobs.get()
	j.g = g
	switch {
	case g.transA && costK < costM && costK < costN && k >= 2*p:
		j.dim = 'k'
		grain := (k + p - 1) / p
		nc := numChunks(k, grain)
		part := getScratch((nc - 1) * m * n)
		j.part = *part
		parallelRun(k, grain, j)
		for c := 1; c < nc; c++ {
			pc := j.part[(c-1)*m*n : c*m*n]
			for i := 0; i < m; i++ {
				Axpy(1, pc[i*n:(i+1)*n], g.c[i*ldc:i*ldc+n])
			}
		}
		putScratch(part)
	case costN < costM:
		j.dim = 'n'
		parallelRun(n, (n+p-1)/p, j)
	default:
		j.dim = 'm'
		parallelRun(m, (m+p-1)/p, j)
	}
	gemmJobs.put(j)
}

// gemmSerialMACs is the product size below which Sgemm does not split: the
// hand-off costs about as much as 2^17 multiply-adds on one core.
const gemmSerialMACs = 1 << 18

type gemmArgs struct {
	transA, transB bool
	m, n, k        int
	alpha          float32
	a              []float32
	lda            int
	b              []float32
	ldb            int
	beta           float32
	c              []float32
	ldc            int
}

// ownGemm enables the package's own kernel (pk_sgemm in kernels.c) for
// products with a small dimension; benchmarks switch it off to compare with
// OpenBLAS.
var ownGemm = true

// ownGemmFits says whether the own kernel (pk_sgemm_ep) takes the product.
// Products with a row-major A (the forward and the input gradients, where
// row i of C depends on row i of A only) take it at every m and n, for k
// up to 1024 (the network's shapes): its tall kernel sums each output over
// k in one fixed order, so a row's result does not depend on how many rows
// share the call, and results are the same for any batch or chunk size.
// OpenBLAS does not promise that (its small-matrix paths and edge kernels
// differ): with bszt's 2,048-wide categorical head on OpenBLAS, a voxel's
// comp_prob changed in the 8th digit with --batch. Products with a
// transposed A (weight gradients, sums over the batch) take it when
// skinny: one of m, k at most 256, n at most 1024. It keeps a B panel in
// L2 and streams A once, so it loses on large squares (1024³: 97 against
// 154 GFLOP/s with AVX-512) and on a very long k (64×1024×13056: 58
// against 68).
func ownGemmFits(g *gemmArgs) bool {
	if !g.transA {
		return g.k <= 1024
	}
	return g.n <= 1024 && min(g.m, g.k) <= 256
}

// call runs the product on the calling thread (one cgo call).
func (g *gemmArgs) call() {
	if g.m == 0 || g.n == 0 {
		return
	}
	if ownGemm && blasThreads.Load() <= 1 && ownGemmFits(g) {
		ra, ca := g.lda, 1
		if g.transA {
			ra, ca = 1, g.lda
		}
		tb := C.int(0)
		if g.transB {
			tb = 1
		}
		if C.pk_sgemm(cl(g.m), cl(g.n), cl(g.k), C.float(g.alpha), fp(g.a), cl(ra), cl(ca), fp(g.b), cl(g.ldb), tb,
			C.float(g.beta), fp(g.c), cl(g.ldc)) != 0 {
			return
		}
	}
	ta, tb := uint32(C.CblasNoTrans), uint32(C.CblasNoTrans)
	if g.transA {
		ta = C.CblasTrans
	}
	if g.transB {
		tb = C.CblasTrans
	}
	C.cblas_sgemm(C.CblasRowMajor, ta, tb, C.blasint(g.m), C.blasint(g.n), C.blasint(g.k), C.float(g.alpha),
		fp(g.a), C.blasint(g.lda), fp(g.b), C.blasint(g.ldb), C.float(g.beta), fp(g.c), C.blasint(g.ldc))
}

type gemmJob struct {
	g    gemmArgs
	dim  byte
	part []float32
}

func (j *gemmJob) run(chunk, lo, hi int) {
	g := j.g
	switch j.dim {
	case 'm': // rows of op(A) and C
		if g.transA {
			g.a = g.a[lo:]
		} else {
			g.a = g.a[lo*g.lda:]
		}
		g.c, g.m = g.c[lo*g.ldc:], hi-lo
	case 'n': // columns of op(B) and C
		if g.transB {
			g.b = g.b[lo*g.ldb:]
		} else {
			g.b = g.b[lo:]
		}
		g.c, g.n = g.c[lo:], hi-lo
	case 'k': // the reduction: chunk 0 updates C, the others write partials
		if g.transA {
			g.a = g.a[lo*g.lda:]
		} else {
			g.a = g.a[lo:]
		}
		if g.transB {
			g.b = g.b[lo:]
		} else {
			g.b = g.b[lo*g.ldb:]
		}
		g.k = hi - lo
		if chunk > 0 {
			g.c, g.ldc, g.beta = j.part[(chunk-1)*g.m*g.n:chunk*g.m*g.n], g.n, 0
		}
	}
	g.call()
}

var gemmJobs jobPool[gemmJob]

var (
	blasOnce    sync.Once
	blasThreads atomic.Int32
)

// initBLAS makes OpenBLAS single-threaded unless SetBLASThreads chose
// otherwise.
func initBLAS() {
	blasOnce.Do(func() {
		if blasThreads.Load() == 0 {
			blasThreads.Store(1)
			C.openblas_set_num_threads(1)
		}
	})
}

// SetBLASThreads lets OpenBLAS use n threads itself; Sgemm then no longer
// splits products over this package's workers. The default, 1, leaves all
// parallelism to this package (no OpenBLAS worker threads spinning while
// the other kernels run).
func SetBLASThreads(n int) {
	n = max(n, 1)
	blasOnce.Do(func() {})
	blasThreads.Store(int32(n))
	C.openblas_set_num_threads(C.int(n))
}

// linearJob runs LinearForward's fused product on a range of rows (dim
// 'm') or columns ('n') of z.
type linearJob struct {
	g            gemmArgs
	bias, res, y []float32
	dim          byte
}

func (j *linearJob) run(_, lo, hi int) {
	g := j.g
	bias, res, y, ldy, ldr := j.bias, j.res, j.y, g.n, g.n
	if j.dim == 'm' {
		g.a, g.c, g.m = g.a[lo*g.lda:], g.c[lo*g.ldc:], hi-lo
		if y != nil {
			y = y[lo*ldy:]
		}
		if res != nil {
			res = res[lo*ldr:]
		}
	} else {
		g.b, g.c, g.n = g.b[lo:], g.c[lo:], hi-lo
		if bias != nil {
			bias = bias[lo:]
		}
		if y != nil {
			y = y[lo:]
		}
		if res != nil {
			res = res[lo:]
		}
	}
	C.pk_sgemm_ep(cl(g.m), cl(g.n), cl(g.k), 1, fp(g.a), cl(g.lda), 1, fp(g.b), cl(g.ldb), 0, 0, fp(g.c), cl(g.ldc),
		fp(bias), fp(y), cl(ldy), fp(res), cl(ldr))
}

var linearJobs jobPool[linearJob]

// linearFused runs LinearForward as one pk_sgemm_ep call per worker when
// the own kernel handles the shape.
func linearFused(m, n, k int, x []float32, ldx int, w []float32, ldw int, bias, res, z, y []float32) bool {
	initBLAS()
	g := gemmArgs{m: m, n: n, k: k, alpha: 1, a: x, lda: ldx, b: w, ldb: ldw, c: z, ldc: n}
	if !ownGemm || blasThreads.Load() > 1 || !ownGemmFits(&g) {
		return false
	}
	j := linearJobs.get()
	j.g, j.bias, j.res, j.y = g, bias, res, y
	p := procs()
	switch {
	case p == 1 || float64(m)*float64(n)*float64(k) < gemmSerialMACs:
		j.dim = 'm'
		j.run(0, 0, m)
	case m >= 24*p:
		j.dim = 'm'
		parallelRun(m, (m+p-1)/p, j)
	default:
		j.dim = 'n'
		parallelRun(n, (n+p-1)/p, j)
	}
	j.bias, j.res, j.y = nil, nil, nil
	linearJobs.put(j)
	return true
}

// fp passes a slice to C; nil stays NULL.
func fp(s []float32) *C.float {
	if s == nil {
		return nil
	}
	return (*C.float)(unsafe.Pointer(unsafe.SliceData(s)))
}

// fpAt passes s[off:] to C, or NULL for a nil slice.
func fpAt(s []float32, off int) *C.float {
	if s == nil {
		return nil
	}
	return (*C.float)(unsafe.Pointer(unsafe.SliceData(s[off:])))
}

func cl(n int) C.long { return C.long(n) }

func addBiasImpl(y []float32, lo, hi, n int, bias []float32) {
	C.pk_add_bias(fp(y), cl(lo), cl(hi), cl(n), fp(bias))
}

func biasGradImpl(dy []float32, lo, hi, n int, dbias []float32) {
	C.pk_bias_grad(fp(dy), cl(lo), cl(hi), cl(n), fp(dbias))
}

func lnFwdImpl(x []float32, lo, hi, dim int, gamma, beta []float32, eps float32, y, mean, rstd []float32) {
	C.pk_ln_fwd(fp(x), cl(lo), cl(hi), cl(dim), fp(gamma), fp(beta), C.float(eps), fp(y), fp(mean), fp(rstd))
}

func lnBwdImpl(dy, x, mean, rstd, gamma []float32, lo, hi, dim int, dx, dgamma, dbeta []float32) {
	C.pk_ln_bwd(fp(dy), fp(x), fp(mean), fp(rstd), fp(gamma), cl(lo), cl(hi), cl(dim), fp(dx), fp(dgamma), fp(dbeta))
}

func modFwdImpl(h, s, c []float32, lo, hi, t, d int, y []float32) {
	C.pk_mod_fwd(fp(h), fp(s), fp(c), cl(lo), cl(hi), cl(t), cl(d), fp(y))
}

func modBwdImpl(dy, h, s []float32, lo, hi, t, d int, dh, ds, dc []float32) {
	C.pk_mod_bwd(fp(dy), fp(h), fp(s), cl(lo), cl(hi), cl(t), cl(d), fp(dh), fp(ds), fp(dc))
}

func lnModFwdImpl(x []float32, lo, hi, t, d int, gamma, beta, s, c []float32, eps float32, y, mean, rstd []float32) {
	C.pk_lnmod_fwd(fp(x), cl(lo), cl(hi), cl(t), cl(d), fp(gamma), fp(beta), fp(s), fp(c), C.float(eps), fp(y), fp(mean), fp(rstd))
}

func lnModBwdImpl(dy, x, mean, rstd, gamma, beta, s []float32, lo, hi, t, d int, dx, dgamma, dbeta, ds, dc, _ []float32) {
	C.pk_lnmod_bwd(fp(dy), fp(x), fp(mean), fp(rstd), fp(gamma), fp(beta), fp(s), cl(lo), cl(hi), cl(t), cl(d),
		fp(dx), fp(dgamma), fp(dbeta), fp(ds), fp(dc))
}

func geluFwdImpl(x, y []float32) {
	if len(x) > 0 {
		C.pk_gelu_fwd(fp(x), fp(y), cl(len(x)))
	}
}

func geluBwdImpl(dy, x, dx []float32) {
	if len(x) > 0 {
		C.pk_gelu_bwd(fp(dy), fp(x), fp(dx), cl(len(x)))
	}
}

func biasGELUFwdImpl(z []float32, lo, hi, n int, bias, y []float32) {
	C.pk_bias_gelu_fwd(fp(z), cl(lo), cl(hi), cl(n), fp(bias), fp(y))
}

func biasGELUBwdImpl(dy, z []float32, lo, hi, n int, dz, dbias []float32) {
	C.pk_bias_gelu_bwd(fp(dy), fp(z), cl(lo), cl(hi), cl(n), fp(dz), fp(dbias))
}

func maskPtr(m Mask) *C.uchar {
	if m.Allow == nil {
		return nil
	}
	return (*C.uchar)(unsafe.Pointer(unsafe.SliceData(m.Allow)))
}

func attnFwdImpl(s AttnShape, q, k, v []float32, m Mask, out, probs []float32, lo, hi int) {
	C.pk_attn_fwd(cl(s.Tq), cl(s.Tk), cl(s.H), cl(s.Dh), cl(s.LdQ), cl(s.LdK), cl(s.LdV), cl(s.LdO),
		fp(q), fp(k), fp(v), maskPtr(m), cl(m.BatchStride), fp(out), fp(probs), cl(lo), cl(hi))
}

func attnBwdImpl(s AttnShape, q, k, v, probs, out, dout []float32, m Mask, lo, hi int, dq, dk, dv []float32) {
	C.pk_attn_bwd(cl(s.Tq), cl(s.Tk), cl(s.H), cl(s.Dh), cl(s.LdQ), cl(s.LdK), cl(s.LdV), cl(s.LdO),
		fp(q), fp(k), fp(v), fp(probs), fp(out), fp(dout), maskPtr(m), cl(m.BatchStride),
		fp(dq), fp(dk), fp(dv), cl(lo), cl(hi))
}

func axpyImpl(alpha float32, x, y []float32) {
	if len(x) > 0 {
		C.pk_axpy(C.float(alpha), fp(x), fp(y), cl(len(x)))
	}
}

func addImpl(dst, a, b []float32) {
	if len(dst) > 0 {
		C.pk_add(fp(dst), fp(a), fp(b), cl(len(dst)))
	}
}

func scaleImpl(alpha float32, x []float32) {
	if len(x) > 0 {
		C.pk_scale(C.float(alpha), fp(x), cl(len(x)))
	}
}

func radamRectImpl(scale []float64, u0 int, grad, val, m, v, ema []float32, k *RAdamScalars) {
	if len(grad) > 0 {
		C.pk_radam_rect((*C.double)(unsafe.Pointer(&scale[0])), cl(len(scale)), cl(u0), fp(grad), fp(val), fp(m), fp(v), fp(ema), cl(len(grad)),
			C.float(k.B1), C.float(k.OmB1), C.float(k.B2), C.float(k.OmB2), C.float(k.A), C.float(k.C2), C.float(k.Eps), C.float(k.Dec), C.float(k.OmDec))
	}
}

func sumSquares2Impl(g, w []float32, gacc, wacc []float64, u0 int) {
	if len(g) > 0 {
		C.pk_sum_squares2(fp(g), fp(w), cl(len(g)), (*C.double)(unsafe.Pointer(&gacc[0])), (*C.double)(unsafe.Pointer(&wacc[0])), cl(len(gacc)), cl(u0))
	}
}
