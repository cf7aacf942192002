package dti

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/mat"

	"github.com/prismsbi/prism/family"
)

// NumParams is the number of unknowns of the log-linear model: the six
// distinct tensor elements and ln S0.
const NumParams = 7

// bUnit scales the b-values inside the design (s/mm² → ms/µm²) so that
// b·D and the design's columns are of order one.
const bUnit = 1000.0

// Reasons a voxel cannot be fitted. FitVoxel returns them unwrapped, so
// they can be compared with == and used as report keys (Error()).
var (
	ErrNonFinite       = errors.New("non-finite signal")
	ErrTooFew          = errors.New("fewer than 7 measurements with a positive signal")
	ErrUnderdetermined = errors.New("the measurements with a positive signal do not determine the tensor")
)

// pivotTol is the smallest ratio of a Cholesky pivot to the diagonal
// element it came from before a weighted design counts as rank-deficient:
// below it the column is within about 1e-5 rad of the span of the others
// and the solution would lose more than 6 of its 16 digits.
const pivotTol = 1e-10

// condMax is the largest condition number of the (scaled) design that
// NewFitter accepts.
const condMax = 1e8

// DefaultWLSIterations is the number of WLS iterations after the OLS fit
// that `prism dmri dti` uses by default.
const DefaultWLSIterations = 1

// Fitter fits diffusion tensors for one gradient table. It is safe for
// concurrent use; each goroutine needs its own Workspace.
type Fitter struct {
	n     int
	iter  int                  // WLS iterations after OLS
	x     [][NumParams]float64 // design rows: −b′g², −2b′g_ag_b, 1 (b′ = b/bUnit)
	pinvT [][NumParams]float64 // row j: column j of the OLS pseudo-inverse
	xx    [][numPairs]float64  // row j: upper triangle of x_j x_jᵀ, row by row
}

// numPairs is the number of elements of the upper triangle of a
// NumParams×NumParams matrix.
const numPairs = NumParams * (NumParams + 1) / 2

// NewFitter prepares the fit for a design of (b [s/mm²], gx, gy, gz) per
// measurement (family.Design with CovDim 4, as gradtable.ReadFSL
// returns; b ≈ 0 rows may carry a zero direction), with wlsIterations
// WLS iterations after the OLS fit (0: OLS only; DefaultWLSIterations is
// 1). It fails when the table cannot determine the tensor: fewer than 7
// measurements, fewer than six independent directions, or a single
// non-zero b-value without b = 0 measurements (then ln S0 and the trace
// are confounded).
func NewFitter(d family.Design, wlsIterations int) (*Fitter, error) {
	if wlsIterations < 0 {
		return nil, fmt.Errorf("dti: %d WLS iterations, want ≥ 0", wlsIterations)
	}
	if d.CovDim != 4 {
		return nil, fmt.Errorf("dti: design %q has %d covariates per measurement, want 4 (b, gx, gy, gz)", d.Name, d.CovDim)
	}
	if d.N < NumParams {
		return nil, fmt.Errorf("dti: design %q has %d measurements, a tensor fit needs at least %d", d.Name, d.N, NumParams)
	}
	f := &Fitter{n: d.N, iter: wlsIterations, x: make([][NumParams]float64, d.N), pinvT: make([][NumParams]float64, d.N), xx: make([][numPairs]float64, d.N)}
	X := mat.NewDense(d.N, NumParams, nil)
	for j := range d.N {
		r := d.Row(j)
		b, gx, gy, gz := r[0]/bUnit, r[1], r[2], r[3]
		row := [NumParams]float64{-b * gx * gx, -b * gy * gy, -b * gz * gz, -2 * b * gx * gy, -2 * b * gx * gz, -2 * b * gy * gz, 1}
		for _, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("dti: design %q: measurement %d has a non-finite b or direction %v", d.Name, j+1, r)
			}
		}
		f.x[j] = row
		k := 0
		for p := range NumParams {
			for q := p; q < NumParams; q++ {
				f.xx[j][k] = row[p] * row[q]
				k++
			}
		}
		X.SetRow(j, row[:])
	}
	var svd mat.SVD
	if !svd.Factorize(X, mat.SVDThin) {
		return nil, fmt.Errorf("dti: design %q: SVD of the design did not converge", d.Name)
	}
	sv := svd.Values(nil)
	if !(sv[NumParams-1] > sv[0]/condMax) {
		return nil, fmt.Errorf("dti: design %q does not determine the tensor (condition number %.3g): it needs at least six non-collinear directions and two distinct b-values (e.g. b = 0 and one shell)", d.Name, sv[0]/sv[NumParams-1])
	}
	// pinv = V Σ⁻¹ Uᵀ; row j of pinvT is column j of pinv.
	var U, V mat.Dense
	svd.UTo(&U)
	svd.VTo(&V)
	for j := range d.N {
		for k := range NumParams {
			var s float64
			for m := range NumParams {
				s += V.At(k, m) * U.At(j, m) / sv[m]
			}
			f.pinvT[j][k] = s
		}
	}
	return f, nil
}

// WLSIterations returns the number of WLS iterations after the OLS fit.
func (f *Fitter) WLSIterations() int { return f.iter }

// N returns the number of measurements per voxel.
func (f *Fitter) N() int { return f.n }

// Workspace is the scratch memory of FitVoxel for one goroutine.
type Workspace struct {
	y, w []float64
}

// NewWorkspace returns a workspace for f.
func (f *Fitter) NewWorkspace() *Workspace {
	return &Workspace{y: make([]float64, f.n), w: make([]float64, f.n)}
}

// Fit is the tensor fit of one voxel. Diffusivities are in mm²/s.
type Fit struct {
	D  [6]float64    // tensor elements Dxx, Dyy, Dzz, Dxy, Dxz, Dyz
	S0 float64       // non-weighted signal, in the units of the input
	L  [3]float64    // eigenvalues L[0] ≥ L[1] ≥ L[2], as fitted
	V  [3][3]float64 // V[k]: unit eigenvector of L[k], signed with z ≥ 0
	FA float64       // fractional anisotropy of the clipped eigenvalues, in [0, 1]
	MD float64       // mean diffusivity (L[0]+L[1]+L[2])/3
	MO float64       // mode of anisotropy of the clipped eigenvalues, in [−1, 1]
	// Excluded is the number of measurements left out because S ≤ 0.
	Excluded int
}

// FitVoxel fits one voxel's signal (len N(), any positive scale: S0 comes
// out in the same units) with OLS followed by WLSIterations() WLS
// iterations, each with weights Ŝ², Ŝ the signal predicted by the
// previous fit. Measurements with S ≤ 0 are left out. The error is nil, ErrNonFinite, ErrTooFew or
// ErrUnderdetermined. FitVoxel does not allocate.
func (f *Fitter) FitVoxel(signal []float64, ws *Workspace) (Fit, error) {
	if len(signal) != f.n {
		panic(fmt.Sprintf("dti: signal of %d measurements for a design of %d", len(signal), f.n))
	}
	y, w := ws.y, ws.w
	used := 0
	for j, s := range signal {
		switch {
		case math.IsNaN(s) || math.IsInf(s, 0):
			return Fit{}, ErrNonFinite
		case s > 0:
			y[j], w[j] = math.Log(s), 1
			used++
		default:
			y[j], w[j] = 0, 0
		}
	}
	if used < NumParams {
		return Fit{}, ErrTooFew
	}
	// Ordinary least squares.
	var beta [NumParams]float64
	if used == f.n {
		for j, p := range f.pinvT {
			yj := y[j]
			for k := range beta {
				beta[k] += p[k] * yj
			}
		}
	} else {
		var ok bool
		if beta, ok = f.solveWeighted(y, w); !ok {
			return Fit{}, ErrUnderdetermined
		}
	}
	// WLS iterations: weights Ŝ² from the previous fit's prediction,
	// scaled so the largest is 1 (the solution does not depend on the
	// scale).
	for range f.iter {
		hmax := math.Inf(-1)
		for j, x := range f.x {
			if signal[j] > 0 {
				w[j] = dot7(x, beta) // predicted ln S, turned into a weight below
				hmax = math.Max(hmax, w[j])
			}
		}
		if math.IsNaN(hmax) || math.IsInf(hmax, 0) {
			return Fit{}, ErrNonFinite
		}
		for j := range w {
			if signal[j] > 0 {
				w[j] = math.Exp(2 * (w[j] - hmax))
			}
		}
		var ok bool
		if beta, ok = f.solveWeighted(y, w); !ok {
			return Fit{}, ErrUnderdetermined
		}
	}
	for _, v := range beta {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Fit{}, ErrNonFinite
		}
	}
	var out Fit
	for k := range out.D {
		out.D[k] = beta[k] / bUnit
	}
	out.S0 = math.Exp(beta[6])
	out.Excluded = f.n - used
	out.L, out.V = Eigen(out.D)
	out.MD = (out.L[0] + out.L[1] + out.L[2]) / 3
	out.FA, out.MO = Anisotropy(out.L)
	return out, nil
}

func dot7(a, b [NumParams]float64) float64 {
	var s float64
	for k := range a {
		s += a[k] * b[k]
	}
	return s
}

// solveWeighted solves the weighted normal equations Σ w_j x_j x_jᵀ β =
// Σ w_j x_j y_j by Cholesky; ok is false when a pivot falls below
// pivotTol times its diagonal element (rank-deficient weighted design).
func (f *Fitter) solveWeighted(y, w []float64) (beta [NumParams]float64, ok bool) {
	var packed [numPairs]float64
	var r [NumParams]float64
	for j, xx := range f.xx {
		wj := w[j]
		if wj == 0 {
			continue
		}
		for k := range packed {
			packed[k] += wj * xx[k]
		}
		wy := wj * y[j]
		for p, x := range f.x[j] {
			r[p] += wy * x
		}
	}
	var a [NumParams][NumParams]float64 // upper triangle
	k := 0
	for p := range NumParams {
		for q := p; q < NumParams; q++ {
			a[p][q] = packed[k]
			k++
		}
	}
	// In-place Cholesky a = RᵀR, R upper triangular.
	for p := range NumParams {
		d := a[p][p]
		for k := range p {
			d -= a[k][p] * a[k][p]
		}
		if !(d > pivotTol*a[p][p]) {
			return beta, false
		}
		d = math.Sqrt(d)
		a[p][p] = d
		for q := p + 1; q < NumParams; q++ {
			s := a[p][q]
			for k := range p {
				s -= a[k][p] * a[k][q]
			}
			a[p][q] = s / d
		}
	}
	// Rᵀz = r, then Rβ = z.
	for p := range NumParams {
		s := r[p]
		for k := range p {
			s -= a[k][p] * beta[k]
		}
		beta[p] = s / a[p][p]
	}
	for p := NumParams - 1; p >= 0; p-- {
		s := beta[p]
		for k := p + 1; k < NumParams; k++ {
			s -= a[p][k] * beta[k]
		}
		beta[p] = s / a[p][p]
	}
	return beta, true
}

// Eigen returns the eigenvalues of the symmetric tensor with elements d
// (Dxx, Dyy, Dzz, Dxy, Dxz, Dyz) in decreasing order and their unit
// eigenvectors, v[k] belonging to l[k], mutually orthogonal and signed
// with z ≥ 0 (then y ≥ 0, then x ≥ 0). It uses cyclic Jacobi rotations
// until the off-diagonal part is below 1e-17 of the norm, so eigenvalues
// are exact to rounding and the vectors orthonormal whatever the
// multiplicities (the vectors of a repeated eigenvalue span its
// eigenspace).
func Eigen(d [6]float64) (l [3]float64, v [3][3]float64) {
	// Work on d scaled to a largest element of 1, so that no square
	// overflows or underflows whatever the units.
	scale := 0.0
	for _, x := range d {
		scale = math.Max(scale, math.Abs(x))
	}
	if scale == 0 || math.IsInf(scale, 0) || math.IsNaN(scale) {
		scale = 1
	}
	a := [3][3]float64{{d[0], d[3], d[4]}, {d[3], d[1], d[5]}, {d[4], d[5], d[2]}}
	for i := range 3 {
		for j := range 3 {
			a[i][j] /= scale
		}
	}
	q := [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}
	norm2 := 0.0
	for i := range 3 {
		for j := range 3 {
			norm2 += a[i][j] * a[i][j]
		}
	}
	for sweep := 0; sweep < 32; sweep++ {
		off := a[0][1]*a[0][1] + a[0][2]*a[0][2] + a[1][2]*a[1][2]
		if !(off > 1e-34*norm2) {
			break
		}
		for _, pq := range [3][2]int{{0, 1}, {0, 2}, {1, 2}} {
			p, r := pq[0], pq[1]
			apq := a[p][r]
			if apq == 0 {
				continue
			}
			theta := (a[r][r] - a[p][p]) / (2 * apq)
			t := 1 / (math.Abs(theta) + math.Hypot(theta, 1))
			if theta < 0 {
				t = -t
			}
			c := 1 / math.Sqrt(t*t+1)
			s := t * c
			a[p][p] -= t * apq
			a[r][r] += t * apq
			a[p][r], a[r][p] = 0, 0
			k := 3 - p - r // the third index
			akp, akr := a[k][p], a[k][r]
			a[k][p] = c*akp - s*akr
			a[k][r] = s*akp + c*akr
			a[p][k], a[r][k] = a[k][p], a[k][r]
			for i := range 3 {
				qp, qr := q[i][p], q[i][r]
				q[i][p] = c*qp - s*qr
				q[i][r] = s*qp + c*qr
			}
		}
	}
	idx := [3]int{0, 1, 2}
	if a[idx[1]][idx[1]] > a[idx[0]][idx[0]] {
		idx[0], idx[1] = idx[1], idx[0]
	}
	if a[idx[2]][idx[2]] > a[idx[1]][idx[1]] {
		idx[1], idx[2] = idx[2], idx[1]
		if a[idx[1]][idx[1]] > a[idx[0]][idx[0]] {
			idx[0], idx[1] = idx[1], idx[0]
		}
	}
	for k, c := range idx {
		l[k] = a[c][c] * scale
		v[k] = Canonical([3]float64{q[0][c], q[1][c], q[2][c]})
	}
	return l, v
}

// Canonical returns ±u with z > 0, or z = 0 and y > 0, or z = y = 0 and
// x ≥ 0: the sign convention of the dyads of package dmri.
func Canonical(u [3]float64) [3]float64 {
	if u[2] < 0 || (u[2] == 0 && (u[1] < 0 || (u[1] == 0 && u[0] < 0))) {
		return [3]float64{-u[0], -u[1], -u[2]}
	}
	return u
}

// Anisotropy returns the fractional anisotropy and the mode of the
// eigenvalues l clipped at zero:
//
//	FA = sqrt(½ Σ_{i<j} (e_i − e_j)² / Σ e_i²)            ∈ [0, 1]
//	MO = 3√6 Π (e_i − ē) / (Σ (e_i − ē)²)^{3/2}          ∈ [−1, 1]
//
// (MO = 1 for a prolate, −1 for an oblate tensor). Both are 0 when the
// clipped eigenvalues are all zero, MO also when they are all equal.
func Anisotropy(l [3]float64) (fa, mo float64) {
	e := [3]float64{max(l[0], 0), max(l[1], 0), max(l[2], 0)}
	ss := e[0]*e[0] + e[1]*e[1] + e[2]*e[2]
	if ss == 0 {
		return 0, 0
	}
	d01, d12, d02 := e[0]-e[1], e[1]-e[2], e[0]-e[2]
	dev2 := (d01*d01 + d12*d12 + d02*d02) / 3 // Σ (e_i − ē)²
	fa = math.Min(1, math.Sqrt(1.5*dev2/ss))
	if dev2 == 0 {
		return fa, 0
	}
	m := (e[0] + e[1] + e[2]) / 3
	mo = 3 * math.Sqrt(6) * (e[0] - m) * (e[1] - m) * (e[2] - m) / (dev2 * math.Sqrt(dev2))
	return fa, math.Max(-1, math.Min(1, mo))
}

// FitVoxels fits voxel v's signal signal[v*N() : (v+1)*N()] into fits[v]
// and its error (nil or one of the Err values) into errs[v], on workers
// goroutines (all cores if ≤ 0). fits and errs must hold one entry per
// voxel.
func (f *Fitter) FitVoxels(signal []float64, fits []Fit, errs []error, workers int) error {
	nv := len(fits)
	if len(signal) != nv*f.n || len(errs) != nv {
		return fmt.Errorf("dti: %d signal values, %d fits and %d errors for voxels of %d measurements", len(signal), len(fits), len(errs), f.n)
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	const chunk = 64
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, (nv+chunk-1)/chunk) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := f.NewWorkspace()
			for {
				lo := int(next.Add(chunk)) - chunk
				if lo >= nv {
					return
				}
				for v := lo; v < min(lo+chunk, nv); v++ {
					fits[v], errs[v] = f.FitVoxel(signal[v*f.n:(v+1)*f.n], ws)
				}
			}
		}()
	}
	wg.Wait()
	return nil
}
