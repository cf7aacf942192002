package dmri

import (
	"math"

	"gonum.org/v1/gonum/integrate/quad"
)

// Normalisers of the Watson and Bingham orientation distributions and the
// Bingham integral
//
//	Z(A) = ∫_{S²} exp(nᵀ A n) dn
//
// for a symmetric 3×3 matrix A, which is all the dispersed compartments
// need: a single-fibre kernel exp(−a (g·n)²) averaged over an ODF
// C·exp(nᵀ A n) is C·Z(A − a g gᵀ) (see convolved.go).
//
// Z depends only on the eigenvalues λ of A. With the pole along the
// eigenvector of the smallest eigenvalue, n = (√(1−t²) cos φ, √(1−t²) sin φ, t)
// in the eigenbasis ordered (max, mid, min), the φ integral is a Bessel
// function, ∫₀^{2π} exp(r(λ₁cos²φ + λ₂sin²φ)) dφ = 2π e^{r(λ₁+λ₂)/2} I₀(r(λ₁−λ₂)/2),
// and
//
//	Z = 4π e^{λmax} ∫₀¹ e^{−Δ t²} I0e(c (1−t²)) dt,   Δ = λmax − λmin,  c = (λmax − λmid)/2,
//
// with I0e(x) = e^{−x} I₀(x). The integrand is a Gaussian of width 1/√Δ times
// a factor that varies on the scale √(2/c) ≥ √(1/Δ) (c ≤ Δ/2), so it is
// smooth on the scale of its own support for every A: it is integrated by
// Gauss–Legendre on [0, T], T = min(1, √(binghamCut/Δ)), beyond which the
// integrand is below e^{−binghamCut} of its maximum. The second moments
// E[n nᵀ] (the gradient ∂log Z/∂A) come from the same nodes:
// E[n_min²] = E[t²], E[n_max²] − E[n_mid²] = E[(1−t²) I1e/I0e].

// binghamNodes is the number of Gauss–Legendre nodes of the 1-D integral;
// with the cut below, TestBinghamIntegral finds relative errors ≤ 1e−13
// against brute-force sphere quadrature over κ ∈ [0, 10⁶].
const binghamNodes = 40

// binghamCut truncates the t integral where e^{−Δt²} < e^{−40} ≈ 4e−18.
// The rest of the integrand is at most √(2πc) ≲ 10⁴ times its value at t = 0
// for c ≤ 10⁷, so the neglected tail is below 1e−13 relative.
const binghamCut = 40.0

// KappaMax caps the Watson/Bingham concentration κ = 1/tan(ODI·π/2): ODI
// below 2/(π·KappaMax) ≈ 6.4e−7 (prior probability 6.4e−7) is treated as
// ODI = 6.4e−7. A Watson-dispersed kernel with κ = 10⁶ differs from the
// undispersed one by at most ~a/κ ≤ 4e−5 relative for b·d ≤ 40, and keeping
// κ bounded keeps the eigenvalues of A − a ggᵀ accurate to ~κ·1e−16.
const KappaMax = 1e6

var glT, glW [binghamNodes]float64

func init() {
	quad.Legendre{}.FixedLocations(glT[:], glW[:], 0, 1)
}

// i01e returns e^{−x}I₀(x) and e^{−x}I₁(x) for x ≥ 0. Below besselCheb it
// evaluates piecewise Chebyshev interpolants (degree chebDeg on unit
// intervals) of the power series; above it the asymptotic expansions with a
// fixed number of precomputed terms. TestI01e checks both against
// trapezoidal quadrature to ~1e−15 relative.
func i01e(x float64) (i0e, i1e float64) {
	if x < besselCheb {
		i := int(x)
		y := 2*(x-float64(i)) - 1
		p := &besselPieces[i]
		// Clenshaw recurrences for both series.
		var b1, b2, c1, c2 float64
		y2 := 2 * y
		for k := chebDeg; k >= 1; k-- {
			b1, b2 = y2*b1-b2+p.c0[k], b1
			c1, c2 = y2*c1-c2+p.c1[k], c1
		}
		return y*b1 - b2 + p.c0[0], y*c1 - c2 + p.c1[0]
	}
	u := 1 / x
	var s0, s1 float64
	for k := asymTerms - 1; k >= 0; k-- {
		s0 = s0*u + asymA[k]
		s1 = s1*u + asymC[k]
	}
	s := 1 / math.Sqrt(2*math.Pi*x)
	return s0 * s, s1 * s
}

// i0e returns e^{−x}I₀(x) for x ≥ 0, as i01e without I₁.
func i0e(x float64) float64 {
	if x < besselCheb {
		i := int(x)
		y := 2*(x-float64(i)) - 1
		c := &besselPieces[i].c0
		var b1, b2 float64
		y2 := 2 * y
		for k := chebDeg; k >= 1; k-- {
			b1, b2 = y2*b1-b2+c[k], b1
		}
		return y*b1 - b2 + c[0]
	}
	u := 1 / x
	var s0 float64
	for k := asymTerms - 1; k >= 0; k-- {
		s0 = s0*u + asymA[k]
	}
	return s0 / math.Sqrt(2*math.Pi*x)
}

const (
	besselCheb = 32 // Chebyshev pieces cover [0, 32)
	chebDeg    = 14 // degree of each piece
	// asymTerms terms of the asymptotic series reach 1e−17 for x ≥ 32: the
	// k-th term is Π_{j≤k} (2j−1)²/(8jx) ≤ 4e−18 at k = 25, x = 32.
	asymTerms = 26
)

type chebPiece struct{ c0, c1 [chebDeg + 1]float64 }

var (
	besselPieces [besselCheb]chebPiece
	asymA, asymC [asymTerms]float64
)

func init() {
	const n = chebDeg + 1
	var f0, f1 [n]float64
	for i := range besselPieces {
		for j := 0; j < n; j++ {
			x := float64(i) + 0.5 + 0.5*math.Cos(math.Pi*(float64(j)+0.5)/n)
			e := math.Exp(-x)
			f0[j], f1[j] = i0Series(x)*e, i1Series(x)*e
		}
		p := &besselPieces[i]
		for k := 0; k < n; k++ {
			var s0, s1 float64
			for j := 0; j < n; j++ {
				c := math.Cos(math.Pi * float64(k) * (float64(j) + 0.5) / n)
				s0 += f0[j] * c
				s1 += f1[j] * c
			}
			p.c0[k], p.c1[k] = 2*s0/n, 2*s1/n
		}
		p.c0[0] /= 2
		p.c1[0] /= 2
	}
	asymA[0], asymC[0] = 1, 1
	for k := 1; k < asymTerms; k++ {
		m := float64((2*k - 1) * (2*k - 1))
		asymA[k] = asymA[k-1] * m / (8 * float64(k))
		asymC[k] = asymC[k-1] * (m - 4) / (8 * float64(k))
	}
}

// binghamLogZ returns log Z for a matrix with eigenvalues l (any order) and,
// when mom is true, the second moments m[i] = E[(n·v_i)²] = ∂log Z/∂l[i]
// along the corresponding eigenvectors.
func binghamLogZ(l [3]float64, mom bool) (logZ float64, m [3]float64) {
	// Order indices: hi ≥ mid ≥ lo.
	hi, mid, lo := 0, 1, 2
	if l[hi] < l[mid] {
		hi, mid = mid, hi
	}
	if l[mid] < l[lo] {
		mid, lo = lo, mid
	}
	if l[hi] < l[mid] {
		hi, mid = mid, hi
	}
	delta := l[hi] - l[lo]
	c := 0.5 * (l[hi] - l[mid])
	T := 1.0
	if delta > binghamCut {
		T = math.Sqrt(binghamCut / delta)
	}
	var j0, jt2, jc float64
	for i := range glT {
		t := T * glT[i]
		t2 := t * t
		w := glW[i] * math.Exp(-delta*t2)
		x := c * (1 - t2)
		if !mom {
			j0 += w * i0e(x)
			continue
		}
		i0e, i1e := i01e(x)
		j0 += w * i0e
		jt2 += w * t2 * i0e
		jc += w * (1 - t2) * i1e
	}
	logZ = l[hi] + math.Log(4*math.Pi*T*j0)
	if mom {
		et := jt2 / j0
		ec := jc / j0
		m[lo] = et
		m[hi] = 0.5 * (1 - et + ec)
		m[mid] = 0.5 * (1 - et - ec)
	}
	return logZ, m
}

// BinghamLogNormaliser returns log Z(A) = log ∫_{S²} exp(nᵀAn) dn for a
// symmetric matrix with eigenvalues l; the Bingham density is
// exp(nᵀAn − log Z). For the Bingham ODF of the paper, A = κμμᵀ + βμ_βμ_βᵀ,
// l = (κ, β, 0). Accurate to ~1e−13 relative in Z for eigenvalue spreads
// up to 10⁷ (tested against sphere quadrature).
func BinghamLogNormaliser(l [3]float64) float64 {
	z, _ := binghamLogZ(l, false)
	return z
}

// hyp1F1Half returns M(κ)·e^{−κ} and M'(κ)/M(κ) for
// M(κ) = ₁F₁(½; 3/2; κ) = ∫₀¹ e^{κt²} dt = e^κ F(√κ)/√κ (F the Dawson
// function), κ ≥ 0. M'/M = E[(μ·n)²] under the Watson distribution.
//
// For κ < 40 the series M = Σ κⁿ/(n!(2n+1)) and M' = Σ κⁿ⁻¹/((n−1)!(2n+1))
// of positive terms are summed (≤ ~110 terms); for κ ≥ 40 the asymptotic
// expansion of the Dawson function, e^{−κ}M = (1/(2κ)) Σ_k (2k−1)!!/(2κ)^k,
// whose smallest term (k ≈ κ) is ~e^{−κ} < 5e−18, and M' = e^κ/(2κ) − M/(2κ).
func hyp1F1Half(kappa float64) (scaled, dlog float64) {
	if kappa < 40 {
		term, m, dm := 1.0, 1.0, 0.0 // term = κⁿ/n!
		for n := 1.0; n < 400; n++ {
			dm += term / (2*n + 1) // term = κ^{n−1}/(n−1)! here
			term *= kappa / n
			add := term / (2*n + 1)
			m += add
			if add <= 1e-17*m && term/(2*n+3) <= 1e-17*dm {
				break
			}
		}
		return m * math.Exp(-kappa), dm / m
	}
	// Asymptotic series in u = 1/(2κ).
	u := 0.5 / kappa
	term, s := 1.0, 1.0
	for k := 1.0; k < 200; k++ {
		next := term * (2*k - 1) * u
		if next >= term {
			break
		}
		term = next
		s += term
		if term <= 1e-17*s {
			break
		}
	}
	scaled = u * s
	// M'/M = (e^κ/M − 1)/(2κ) = (1/scaled − 1)·u.
	return scaled, (1/scaled - 1) * u
}

// WatsonLogNormaliser returns log(4π ₁F₁(½; 3/2; κ)), so that the Watson
// density on the sphere is exp(κ(μ·n)² − WatsonLogNormaliser(κ)), κ ≥ 0.
// Relative accuracy ~1e−15 in the normaliser for every κ ≥ 0 (no overflow:
// it is evaluated as κ + log(4π e^{−κ}₁F₁)).
func WatsonLogNormaliser(kappa float64) float64 {
	s, _ := hyp1F1Half(kappa)
	return kappa + math.Log(4*math.Pi*s)
}

// WatsonODF is the Watson density C(κ)·exp(κ(μ·n)²) on the unit sphere
// (integrating to 1 over the whole sphere).
func WatsonODF(n, mu [3]float64, kappa float64) float64 {
	c := dot(n, mu)
	return math.Exp(kappa*(c*c-1) - (WatsonLogNormaliser(kappa) - kappa))
}

// BinghamODF is the Bingham density exp(κ(μ·n)² + β(μ_β·n)² − log Z) on the
// unit sphere for orthogonal unit axes μ, μ_β and 0 ≤ β ≤ κ.
func BinghamODF(n, mu, muB [3]float64, kappa, beta float64) float64 {
	c, cb := dot(n, mu), dot(n, muB)
	return math.Exp(kappa*(c*c-1) + beta*cb*cb - (BinghamLogNormaliser([3]float64{0, beta - kappa, -kappa})))
}

// jacobi3 diagonalises a symmetric 3×3 matrix by cyclic Jacobi rotations:
// a = V diag(w) Vᵀ with the eigenvectors in the columns of V.
func jacobi3(a [3][3]float64) (w [3]float64, v [3][3]float64) {
	v = [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}
	for sweep := 0; sweep < 12; sweep++ {
		off := math.Abs(a[0][1]) + math.Abs(a[0][2]) + math.Abs(a[1][2])
		if off == 0 {
			break
		}
		for _, pq := range [3][2]int{{0, 1}, {0, 2}, {1, 2}} {
			p, q := pq[0], pq[1]
			apq := a[p][q]
			if apq == 0 {
				continue
			}
			app, aqq := a[p][p], a[q][q]
			// Negligible next to both diagonal entries: set to zero.
			if sweep > 2 && math.Abs(apq) < 1e-18*math.Abs(app) && math.Abs(apq) < 1e-18*math.Abs(aqq) {
				a[p][q], a[q][p] = 0, 0
				continue
			}
			theta := (aqq - app) / (2 * apq)
			t := 1 / (math.Abs(theta) + math.Sqrt(theta*theta+1))
			if theta < 0 {
				t = -t
			}
			c := 1 / math.Sqrt(t*t+1)
			s := t * c
			a[p][p] = app - t*apq
			a[q][q] = aqq + t*apq
			a[p][q], a[q][p] = 0, 0
			r := 3 - p - q // the remaining index
			arp, arq := a[r][p], a[r][q]
			a[r][p] = c*arp - s*arq
			a[p][r] = a[r][p]
			a[r][q] = s*arp + c*arq
			a[q][r] = a[r][q]
			for k := 0; k < 3; k++ {
				vkp, vkq := v[k][p], v[k][q]
				v[k][p] = c*vkp - s*vkq
				v[k][q] = s*vkp + c*vkq
			}
		}
	}
	return [3]float64{a[0][0], a[1][1], a[2][2]}, v
}
