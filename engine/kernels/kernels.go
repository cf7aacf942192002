package kernels

import (
	"fmt"
	"sync"
)

// Work sizes below which a kernel runs on the calling goroutine only: handing
// a range to a worker costs about a microsecond, so a piece should carry at
// least a few microseconds of work.
const (
	grainElems = 1 << 14 // elements per piece for streaming kernels
	grainFlops = 1 << 16 // multiply-adds per piece for attention
)

func rowGrain(dim int) int { return max(1, grainElems/max(dim, 1)) }

func checkLen(name string, s []float32, n int) {
	if len(s) < n {
		panic(fmt.Sprintf("kernels: %s has length %d, need %d", name, len(s), n))
	}
}

func checkOpt(name string, s []float32, n int) {
	if s != nil {
		checkLen(name, s, n)
	}
}

// jobPool recycles the job structs that carry kernel arguments to workers.
type jobPool[J any] struct{ p sync.Pool }

func (p *jobPool[J]) get() *J {
	if v := p.p.Get(); v != nil {
		return v.(*J)
	}
	return new(J)
}

func (p *jobPool[J]) put(j *J) {
	var zero J
	*j = zero // drop references to caller buffers
	p.p.Put(j)
}

// scratchPool recycles float32 scratch buffers (partial sums of reductions,
// per-row buffers of the pure-Go attention).
var scratchPool sync.Pool

func getScratch(n int) *[]float32 {
	if v := scratchPool.Get(); v != nil {
		s := v.(*[]float32)
		if cap(*s) >= n {
			*s = (*s)[:n]
			return s
		}
	}
	s := make([]float32, n)
	return &s
}

func putScratch(s *[]float32) { scratchPool.Put(s) }

// reduceInto adds the partial sums of chunks 1..p-1 (each n long, chunk c at
// offset (c-1)·n of part) into dst.
func reduceInto(dst, part []float32, p, n int) {
	for c := 1; c < p; c++ {
		Axpy(1, part[(c-1)*n:c*n], dst)
	}
}

// ---- bias -----------------------------------------------------------------

type addBiasJob struct {
	y, bias []float32
	n       int
}

func (j *addBiasJob) run(_, lo, hi int) { addBiasImpl(j.y, lo, hi, j.n, j.bias) }

var addBiasJobs jobPool[addBiasJob]

// AddBias adds bias[0:n] to every row of the rows×n matrix y.
func AddBias(y []float32, rows, n int, bias []float32) {
	checkLen("y", y, rows*n)
	checkLen("bias", bias, n)
	j := addBiasJobs.get()
	*j = addBiasJob{y: y, bias: bias, n: n}
	parallelRun(rows, rowGrain(n), j)
	addBiasJobs.put(j)
}

type biasGradJob struct {
	dy, dbias, part []float32
	n               int
}

func (j *biasGradJob) run(c, lo, hi int) {
	dst := j.dbias
	if c > 0 {
		dst = j.part[(c-1)*j.n : c*j.n]
	}
	biasGradImpl(j.dy, lo, hi, j.n, dst)
}

var biasGradJobs jobPool[biasGradJob]

// BiasGrad accumulates the column sums of the rows×n matrix dy into dbias.
func BiasGrad(dy []float32, rows, n int, dbias []float32) {
	checkLen("dy", dy, rows*n)
	checkLen("dbias", dbias, n)
	grain := rowGrain(n)
	p := numChunks(rows, grain)
	part := getScratch((p - 1) * n)
	clear(*part)
	j := biasGradJobs.get()
	*j = biasGradJob{dy: dy, dbias: dbias, part: *part, n: n}
	parallelRun(rows, grain, j)
	biasGradJobs.put(j)
	reduceInto(dbias, *part, p, n)
	putScratch(part)
}

// ---- layer norm -----------------------------------------------------------

type lnFwdJob struct {
	x, gamma, beta, y, mean, rstd []float32
	dim                           int
	eps                           float32
}

func (j *lnFwdJob) run(_, lo, hi int) {
	lnFwdImpl(j.x, lo, hi, j.dim, j.gamma, j.beta, j.eps, j.y, j.mean, j.rstd)
}

var lnFwdJobs jobPool[lnFwdJob]

// LayerNormForward normalises each of the rows of x (rows×dim) to zero mean
// and unit variance (biased variance, eps added inside the square root) and
// writes y = x̂·gamma + beta. gamma nil means 1, beta nil means 0. The row
// statistics go to mean and rstd (1/σ, length rows) for the backward; both
// may be nil in inference. y may alias x.
func LayerNormForward(x []float32, rows, dim int, gamma, beta []float32, eps float32, y, mean, rstd []float32) {
	checkLen("x", x, rows*dim)
	checkLen("y", y, rows*dim)
	checkOpt("gamma", gamma, dim)
	checkOpt("beta", beta, dim)
	checkOpt("mean", mean, rows)
	checkOpt("rstd", rstd, rows)
	j := lnFwdJobs.get()
	*j = lnFwdJob{x: x, gamma: gamma, beta: beta, y: y, mean: mean, rstd: rstd, dim: dim, eps: eps}
	parallelRun(rows, rowGrain(dim), j)
	lnFwdJobs.put(j)
}

type lnBwdJob struct {
	dy, x, mean, rstd, gamma, dx, dgamma, dbeta, part []float32
	dim                                               int
}

func (j *lnBwdJob) run(c, lo, hi int) {
	dg, db := j.dgamma, j.dbeta
	if c > 0 {
		p := j.part[(c-1)*2*j.dim : c*2*j.dim]
		if dg != nil {
			dg = p[:j.dim]
		}
		if db != nil {
			db = p[j.dim:]
		}
	}
	lnBwdImpl(j.dy, j.x, j.mean, j.rstd, j.gamma, lo, hi, j.dim, j.dx, dg, db)
}

var lnBwdJobs jobPool[lnBwdJob]

// LayerNormBackward accumulates the gradients of LayerNormForward: dx (may be
// nil), and dgamma, dbeta (may be nil when the norm has no such parameter).
// mean and rstd are the statistics saved by the forward.
func LayerNormBackward(dy, x, mean, rstd, gamma []float32, rows, dim int, dx, dgamma, dbeta []float32) {
	checkLen("dy", dy, rows*dim)
	checkLen("x", x, rows*dim)
	checkLen("mean", mean, rows)
	checkLen("rstd", rstd, rows)
	checkOpt("gamma", gamma, dim)
	checkOpt("dx", dx, rows*dim)
	checkOpt("dgamma", dgamma, dim)
	checkOpt("dbeta", dbeta, dim)
	grain := rowGrain(dim)
	p := numChunks(rows, grain)
	part := getScratch((p - 1) * 2 * dim)
	clear(*part)
	j := lnBwdJobs.get()
	*j = lnBwdJob{dy: dy, x: x, mean: mean, rstd: rstd, gamma: gamma, dx: dx, dgamma: dgamma, dbeta: dbeta, part: *part, dim: dim}
	parallelRun(rows, grain, j)
	lnBwdJobs.put(j)
	for c := 1; c < p; c++ {
		pc := (*part)[(c-1)*2*dim : c*2*dim]
		if dgamma != nil {
			Axpy(1, pc[:dim], dgamma)
		}
		if dbeta != nil {
			Axpy(1, pc[dim:], dbeta)
		}
	}
	putScratch(part)
}

// ---- AdaLN modulation -----------------------------------------------------

type modFwdJob struct {
	h, s, c, y []float32
	t, d       int
}

func (j *modFwdJob) run(_, lo, hi int) { modFwdImpl(j.h, j.s, j.c, lo, hi, j.t, j.d, j.y) }

var modFwdJobs jobPool[modFwdJob]

// ModulateForward computes y = h·(1+s) + c with h, y of shape [b, t, d] and
// s, c of shape [b, d] broadcast over t. y may alias h.
func ModulateForward(h, s, c []float32, b, t, d int, y []float32) {
	checkLen("h", h, b*t*d)
	checkLen("s", s, b*d)
	checkLen("c", c, b*d)
	checkLen("y", y, b*t*d)
	j := modFwdJobs.get()
	*j = modFwdJob{h: h, s: s, c: c, y: y, t: t, d: d}
	parallelRun(b, max(1, grainElems/max(t*d, 1)), j)
	modFwdJobs.put(j)
}

type modBwdJob struct {
	dy, h, s, dh, ds, dc []float32
	t, d                 int
}

func (j *modBwdJob) run(_, lo, hi int) {
	modBwdImpl(j.dy, j.h, j.s, lo, hi, j.t, j.d, j.dh, j.ds, j.dc)
}

var modBwdJobs jobPool[modBwdJob]

// ModulateBackward accumulates the gradients of ModulateForward into dh
// ([b, t, d]), ds and dc ([b, d]); any of them may be nil.
func ModulateBackward(dy, h, s []float32, b, t, d int, dh, ds, dc []float32) {
	checkLen("dy", dy, b*t*d)
	checkLen("h", h, b*t*d)
	checkLen("s", s, b*d)
	checkOpt("dh", dh, b*t*d)
	checkOpt("ds", ds, b*d)
	checkOpt("dc", dc, b*d)
	j := modBwdJobs.get()
	*j = modBwdJob{dy: dy, h: h, s: s, dh: dh, ds: ds, dc: dc, t: t, d: d}
	parallelRun(b, max(1, grainElems/max(t*d, 1)), j)
	modBwdJobs.put(j)
}

// ---- fused LayerNorm + modulation ------------------------------------------

type lnModFwdJob struct {
	x, gamma, beta, s, c, y, mean, rstd []float32
	t, d                                int
	eps                                 float32
}

func (j *lnModFwdJob) run(_, lo, hi int) {
	lnModFwdImpl(j.x, lo, hi, j.t, j.d, j.gamma, j.beta, j.s, j.c, j.eps, j.y, j.mean, j.rstd)
}

var lnModFwdJobs jobPool[lnModFwdJob]

// LayerNormModulateForward fuses LayerNormForward (over the last dim d, with
// optional gamma, beta) and ModulateForward: y = LN(x)·(1+s) + c, x and y
// [b, t, d], s and c [b, d]. mean and rstd ([b·t], may be nil) are saved for
// the backward. y may alias x.
func LayerNormModulateForward(x []float32, b, t, d int, gamma, beta, s, c []float32, eps float32, y, mean, rstd []float32) {
	checkLen("x", x, b*t*d)
	checkLen("y", y, b*t*d)
	checkOpt("gamma", gamma, d)
	checkOpt("beta", beta, d)
	checkLen("s", s, b*d)
	checkLen("c", c, b*d)
	checkOpt("mean", mean, b*t)
	checkOpt("rstd", rstd, b*t)
	j := lnModFwdJobs.get()
	*j = lnModFwdJob{x: x, gamma: gamma, beta: beta, s: s, c: c, y: y, mean: mean, rstd: rstd, t: t, d: d, eps: eps}
	parallelRun(b, max(1, grainElems/max(t*d, 1)), j)
	lnModFwdJobs.put(j)
}

type lnModBwdJob struct {
	dy, x, mean, rstd, gamma, beta, s, dx, dgamma, dbeta, ds, dc, part []float32
	t, d                                                               int
}

func (j *lnModBwdJob) run(c, lo, hi int) {
	d := j.d
	p := j.part[c*4*d : (c+1)*4*d]
	dg, db := j.dgamma, j.dbeta
	if c > 0 {
		if dg != nil {
			dg = p[2*d : 3*d]
		}
		if db != nil {
			db = p[3*d : 4*d]
		}
	}
	lnModBwdImpl(j.dy, j.x, j.mean, j.rstd, j.gamma, j.beta, j.s, lo, hi, j.t, d, j.dx, dg, db, j.ds, j.dc, p[:2*d])
}

var lnModBwdJobs jobPool[lnModBwdJob]

// LayerNormModulateBackward accumulates the gradients of
// LayerNormModulateForward into dx ([b, t, d]), dgamma, dbeta ([d]) and ds,
// dc ([b, d]); any of them may be nil.
func LayerNormModulateBackward(dy, x, mean, rstd, gamma, beta, s []float32, b, t, d int, dx, dgamma, dbeta, ds, dc []float32) {
	checkLen("dy", dy, b*t*d)
	checkLen("x", x, b*t*d)
	checkLen("mean", mean, b*t)
	checkLen("rstd", rstd, b*t)
	checkOpt("gamma", gamma, d)
	checkOpt("beta", beta, d)
	checkLen("s", s, b*d)
	checkOpt("dx", dx, b*t*d)
	checkOpt("dgamma", dgamma, d)
	checkOpt("dbeta", dbeta, d)
	checkOpt("ds", ds, b*d)
	checkOpt("dc", dc, b*d)
	grain := max(1, grainElems/max(t*d, 1))
	p := numChunks(b, grain)
	part := getScratch(p * 4 * d)
	clear(*part)
	j := lnModBwdJobs.get()
	*j = lnModBwdJob{dy: dy, x: x, mean: mean, rstd: rstd, gamma: gamma, beta: beta, s: s, dx: dx, dgamma: dgamma, dbeta: dbeta, ds: ds, dc: dc, part: *part, t: t, d: d}
	parallelRun(b, grain, j)
	lnModBwdJobs.put(j)
	for c := 1; c < p; c++ {
		pc := (*part)[c*4*d : (c+1)*4*d]
		if dgamma != nil {
			Axpy(1, pc[2*d:3*d], dgamma)
		}
		if dbeta != nil {
			Axpy(1, pc[3*d:], dbeta)
		}
	}
	putScratch(part)
}

// ---- GELU -----------------------------------------------------------------

type geluJob struct {
	dy, x, y []float32 // y is dx in the backward
	bwd      bool
}

func (j *geluJob) run(_, lo, hi int) {
	if j.bwd {
		geluBwdImpl(j.dy[lo:hi], j.x[lo:hi], j.y[lo:hi])
	} else {
		geluFwdImpl(j.x[lo:hi], j.y[lo:hi])
	}
}

var geluJobs jobPool[geluJob]

// GELUForward writes y = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (the tanh
// approximation: JAX's default, PyTorch approximate='tanh'). y may alias x.
func GELUForward(x, y []float32) {
	checkLen("y", y, len(x))
	j := geluJobs.get()
	*j = geluJob{x: x, y: y}
	parallelRun(len(x), grainElems, j)
	geluJobs.put(j)
}

// GELUBackward accumulates dx += dy·GELU'(x).
func GELUBackward(dy, x, dx []float32) {
	checkLen("dy", dy, len(x))
	checkLen("dx", dx, len(x))
	j := geluJobs.get()
	*j = geluJob{dy: dy, x: x, y: dx, bwd: true}
	parallelRun(len(x), grainElems, j)
	geluJobs.put(j)
}

type biasGELUJob struct {
	z, bias, y, dy, dz, dbias, part []float32
	n                               int
	bwd                             bool
}

func (j *biasGELUJob) run(c, lo, hi int) {
	if !j.bwd {
		biasGELUFwdImpl(j.z, lo, hi, j.n, j.bias, j.y)
		return
	}
	db := j.dbias
	if c > 0 && db != nil {
		db = j.part[(c-1)*j.n : c*j.n]
	}
	biasGELUBwdImpl(j.dy, j.z, lo, hi, j.n, j.dz, db)
}

var biasGELUJobs jobPool[biasGELUJob]

// BiasGELUForward fuses AddBias and GELUForward for the rows×n matrix z (a
// linear layer's output): it adds bias (nil: none) to z in place, so that z
// holds the pre-activation the backward needs, and writes y = GELU(z).
func BiasGELUForward(z []float32, rows, n int, bias, y []float32) {
	checkLen("z", z, rows*n)
	checkOpt("bias", bias, n)
	checkLen("y", y, rows*n)
	j := biasGELUJobs.get()
	*j = biasGELUJob{z: z, bias: bias, y: y, n: n}
	parallelRun(rows, rowGrain(n), j)
	biasGELUJobs.put(j)
}

// BiasGELUBackward accumulates g = dy·GELU'(z) into dz and its column sums
// into dbias (either may be nil); z is the pre-activation left by
// BiasGELUForward.
func BiasGELUBackward(dy, z []float32, rows, n int, dz, dbias []float32) {
	checkLen("dy", dy, rows*n)
	checkLen("z", z, rows*n)
	checkOpt("dz", dz, rows*n)
	checkOpt("dbias", dbias, n)
	grain := rowGrain(n)
	p := numChunks(rows, grain)
	part := getScratch((p - 1) * n)
	clear(*part)
	j := biasGELUJobs.get()
	*j = biasGELUJob{dy: dy, z: z, dz: dz, dbias: dbias, part: *part, n: n, bwd: true}
	parallelRun(rows, grain, j)
	biasGELUJobs.put(j)
	if dbias != nil {
		reduceInto(dbias, *part, p, n)
	}
	putScratch(part)
}

// ---- elementwise ------------------------------------------------------------

type elemJob struct {
	dst, a, b []float32
	alpha     float32
	op        int
}

const (
	opAxpy = iota
	opAdd
	opScale
)

func (j *elemJob) run(_, lo, hi int) {
	switch j.op {
	case opAxpy:
		axpyImpl(j.alpha, j.a[lo:hi], j.dst[lo:hi])
	case opAdd:
		addImpl(j.dst[lo:hi], j.a[lo:hi], j.b[lo:hi])
	case opScale:
		scaleImpl(j.alpha, j.dst[lo:hi])
	}
}

var elemJobs jobPool[elemJob]

// elemGrain is larger than grainElems: these kernels are memory bound and
// cost well under a nanosecond per element.
const elemGrain = 1 << 16

// Axpy computes y += alpha·x over len(x) elements (gradient accumulation,
// residual adds).
func Axpy(alpha float32, x, y []float32) {
	checkLen("y", y, len(x))
	if len(x) < elemGrain {
		axpyImpl(alpha, x, y[:len(x)])
		return
	}
	j := elemJobs.get()
	*j = elemJob{dst: y, a: x, alpha: alpha, op: opAxpy}
	parallelRun(len(x), elemGrain, j)
	elemJobs.put(j)
}

// Add writes dst = a + b over len(dst) elements; dst may alias a or b.
func Add(dst, a, b []float32) {
	checkLen("a", a, len(dst))
	checkLen("b", b, len(dst))
	if len(dst) < elemGrain {
		addImpl(dst, a[:len(dst)], b[:len(dst)])
		return
	}
	j := elemJobs.get()
	*j = elemJob{dst: dst, a: a, b: b, op: opAdd}
	parallelRun(len(dst), elemGrain, j)
	elemJobs.put(j)
}

// Scale multiplies x by alpha in place.
func Scale(alpha float32, x []float32) {
	if len(x) < elemGrain {
		scaleImpl(alpha, x)
		return
	}
	j := elemJobs.get()
	*j = elemJob{dst: x, alpha: alpha, op: opScale}
	parallelRun(len(x), elemGrain, j)
	elemJobs.put(j)
}

// Zero sets x to zero.
func Zero(x []float32) { clear(x) }
