package family

import (
	"math"

	"gonum.org/v1/gonum/mathext"
)

// This file holds the bijections that carry the standard-normal latent θ to
// natural parameters (paper App. A.2). None
// of them allocate.

// MaxSimplex is the largest number of simplex components StickBreaking
// supports (its scratch space lives on the stack).
const MaxSimplex = 32

// stickClip keeps the stick-breaking uniforms and proportions away from 0 and
// 1, as the reference implementation does.
const stickClip = 1e-12

// tinyProportion is the smallest stick proportion StickBreaking.Inverse
// accepts; smaller ones (and zero) are raised to it.
const tinyProportion = 1e-300

// Phi is the standard normal cumulative distribution function. It is
// computed from math.Erfc so that both tails keep full relative precision
// (Phi(-z) is accurate where 1-Phi(z) would cancel).
func Phi(z float64) float64 {
	return 0.5 * math.Erfc(-z/math.Sqrt2)
}

// PhiInv is the standard normal quantile function, the inverse of Phi. It
// returns -Inf at 0 and +Inf at 1 and is accurate to a few ulps in both
// tails.
func PhiInv(u float64) float64 {
	switch {
	case u <= 0:
		return math.Inf(-1)
	case u >= 1:
		return math.Inf(1)
	}
	return mathext.NormalQuantile(u)
}

// NormPDF is the standard normal density.
func NormPDF(z float64) float64 {
	return math.Exp(-0.5*z*z) / math.Sqrt(2*math.Pi)
}

// Interval maps a latent z to a + (b−a)Φ(z), which is uniform on (a, b) when
// z is standard normal, and returns the value and dv/dz.
func Interval(z, a, b float64) (v, dv float64) {
	return a + (b-a)*Phi(z), (b - a) * NormPDF(z)
}

// IntervalInv inverts Interval: it returns the latent z with
// a + (b−a)Φ(z) = v. Values at or outside the interval edges map to ∓Inf.
func IntervalInv(v, a, b float64) float64 {
	return PhiInv((v - a) / (b - a))
}

// Hemisphere maps (z1, z2) to a direction uniform on the upper hemisphere
// when z1, z2 are independent standard normals: polar angle
// θ = arccos(1−Φ(z1)) ∈ [0, π/2] and azimuth φ = 2πΦ(z2) − π ∈ [−π, π]. It
// also returns dθ/dz1 and dφ/dz2.
//
// cos θ = 1−Φ(z1) = Φ(−z1) is uniform on (0, 1), which is the uniform
// distribution on the hemisphere by Archimedes' hat-box theorem.
func Hemisphere(z1, z2 float64) (theta, phi, dTheta, dPhi float64) {
	c := Phi(-z1)
	// sin θ = sqrt((1−c)(1+c)) with 1−c = Φ(z1) computed without cancellation;
	// atan2 keeps full relative precision of θ near the pole, where acos(c)
	// would not.
	s := math.Sqrt(Phi(z1) * (1 + c))
	theta = math.Atan2(s, c)
	if s > 0 {
		dTheta = NormPDF(z1) / s
	}
	phi = 2*math.Pi*Phi(z2) - math.Pi
	dPhi = 2 * math.Pi * NormPDF(z2)
	return theta, phi, dTheta, dPhi
}

// HemisphereInv inverts Hemisphere for θ ∈ [0, π/2], φ ∈ [−π, π].
func HemisphereInv(theta, phi float64) (z1, z2 float64) {
	// Φ(−z1) = cos θ; near the pole use 1 − cos θ = 2 sin²(θ/2) = Φ(z1) to
	// avoid cancellation.
	if c := math.Cos(theta); c < 0.5 {
		z1 = -PhiInv(c)
	} else {
		h := math.Sin(theta / 2)
		z1 = PhiInv(2 * h * h)
	}
	z2 = PhiInv((phi + math.Pi) / (2 * math.Pi))
	return z1, z2
}

// Direction returns the unit vector with polar angle theta and azimuth phi:
// (sinθ cosφ, sinθ sinφ, cosθ).
func Direction(theta, phi float64) [3]float64 {
	st, ct := math.Sincos(theta)
	sp, cp := math.Sincos(phi)
	return [3]float64{st * cp, st * sp, ct}
}

// StickBreaking is the masked Dirichlet stick-breaking bijection of the
// reference implementation. With K = len(Alpha) simplex components and a mask
// "on" selecting the active ones, the K−1 latents ε map to fractions π that
// are Dirichlet(α restricted to the active components) distributed when ε is
// standard normal; inactive components get π = 0.
//
// Latent i is active when component i is on and some later component is on,
// so k active components use k−1 latents. For an active latent,
// u_i = Φ(ε_i) (clipped to [1e−12, 1−1e−12]), b_i = Σ_{j>i, on} α_j and the
// stick proportion is φ_i = I⁻¹_{u_i}(α_i, b_i), the Beta(α_i, b_i)
// quantile (computed by invBetaLower, a Halley iteration on gonum's
// mathext.RegIncBeta that falls back to mathext.InvRegIncBeta). Then
// π_i = φ_i·(1 − Σ_{j<i} π_j) and the last active component takes the
// remainder.
type StickBreaking struct {
	Alpha []float64
}

// stickState is the forward pass of StickBreaking, kept for the VJP.
type stickState struct {
	phi  [MaxSimplex]float64 // proportions of active latents
	rest [MaxSimplex]float64 // remaining stick before component i
	dphi [MaxSimplex]float64 // dφ_i/dε_i
}

// suffix writes after[i] = Σ_{j>i, on} α_j and returns the index of the
// last active component (−1 if none). Summing from the end makes each b_i
// exact up to one rounding per term, independent of earlier components.
func (s StickBreaking) suffix(on []bool, after *[MaxSimplex]float64) int {
	last := -1
	acc := 0.0
	for i := len(s.Alpha) - 1; i >= 0; i-- {
		after[i] = acc
		if on[i] {
			if last < 0 {
				last = i
			}
			acc += s.Alpha[i]
		}
	}
	return last
}

// forward computes π and, when st is non-nil, the quantities the VJP needs.
func (s StickBreaking) forward(eps []float64, on []bool, pi []float64, st *stickState) {
	K := len(s.Alpha)
	if K > MaxSimplex {
		panic("family: StickBreaking supports at most 32 components")
	}
	var after [MaxSimplex]float64
	last := s.suffix(on, &after)
	for i := 0; i < K; i++ {
		pi[i] = 0
	}
	if last < 0 {
		return
	}
	rest := 1.0
	for i := 0; i < last; i++ {
		if !on[i] {
			continue
		}
		b := after[i]
		u, uc := Phi(eps[i]), Phi(-eps[i]) // u and 1−u, both to full precision
		clipped := false
		if u < stickClip {
			u, uc, clipped = stickClip, 1-stickClip, true
		} else if uc < stickClip {
			u, uc, clipped = 1-stickClip, stickClip, true
		}
		// φ = I⁻¹_u(α, b). When φ is close to 1 its complement
		// 1−φ = I⁻¹_{1−u}(b, α) is computed directly so that the remaining
		// stick keeps its relative precision.
		// φ > 1/2 exactly when u > I_{1/2}(α, b); the inverse is always
		// solved on the lower half by the symmetry I_x(α,b) = 1 − I_{1−x}(b,α).
		lb := mathext.Lbeta(s.Alpha[i], b)
		var p, q float64
		if u <= mathext.RegIncBeta(s.Alpha[i], b, 0.5) {
			p = invBetaLower(s.Alpha[i], b, u, lb)
			q = 1 - p
		} else {
			q = invBetaLower(b, s.Alpha[i], uc, lb)
			p = 1 - q
		}
		if math.IsNaN(p) || math.IsNaN(q) {
			p, q = 0.5, 0.5
		}
		pi[i] = p * rest
		if st != nil {
			st.phi[i] = p
			st.rest[i] = rest
			st.dphi[i] = 0
			if !clipped && p > 0 && q > 0 {
				// dφ/dε = φ_N(ε) / Beta(φ; α, b)-density, in logs.
				logDens := (s.Alpha[i]-1)*math.Log(p) + (b-1)*math.Log(q) - lb
				st.dphi[i] = math.Exp(-0.5*eps[i]*eps[i] - 0.5*math.Log(2*math.Pi) - logDens)
			}
		}
		rest *= q
	}
	pi[last] = rest
	// Renormalise over the active components (guards against rounding).
	sum := 0.0
	for i := 0; i <= last; i++ {
		sum += pi[i]
	}
	if sum > 0 && sum != 1 {
		for i := 0; i <= last; i++ {
			pi[i] /= sum
		}
	}
}

// Fractions writes the simplex fractions for latents eps (length K−1) and
// mask on (length K) into pi (length K). Inactive latents are ignored.
func (s StickBreaking) Fractions(eps []float64, on []bool, pi []float64) {
	s.forward(eps, on, pi, nil)
}

// VJP accumulates gEps += (∂π/∂ε)ᵀ gPi. Only active latents receive
// gradient; inactive entries of gEps are left unchanged.
func (s StickBreaking) VJP(eps []float64, on []bool, gPi, gEps []float64) {
	var st stickState
	var pi [MaxSimplex]float64
	s.forward(eps, on, pi[:len(s.Alpha)], &st)
	last := -1
	for i := len(s.Alpha) - 1; i >= 0; i-- {
		if on[i] {
			last = i
			break
		}
	}
	if last < 0 {
		return
	}
	// With active latents a_1 < … < a_m and last active component L:
	//   π_{a_j} = φ_j R_j,  R_{j+1} = R_j (1−φ_j),  π_L = R_{m+1}.
	// T_j = ∂(Σ_{later} gπ·π)/∂R_{j+1} · … is accumulated backwards:
	//   T = gπ_L;  ∂/∂φ_j = R_j (gπ_{a_j} − T);  T ← gπ_{a_j} φ_j + (1−φ_j) T.
	T := gPi[last]
	for i := last - 1; i >= 0; i-- {
		if !on[i] {
			continue
		}
		gphi := st.rest[i] * (gPi[i] - T)
		gEps[i] += gphi * st.dphi[i]
		T = gPi[i]*st.phi[i] + (1-st.phi[i])*T
	}
}

// Inverse writes the latents eps (length K−1) that Fractions maps to pi under
// mask on. Inactive latents are set to zero.
func (s StickBreaking) Inverse(pi []float64, on []bool, eps []float64) {
	K := len(s.Alpha)
	if K > MaxSimplex {
		panic("family: StickBreaking supports at most 32 components")
	}
	var after [MaxSimplex]float64
	last := s.suffix(on, &after)
	for i := 0; i < K-1; i++ {
		eps[i] = 0
	}
	// The stick remaining after component i is the sum of the later
	// fractions; summing from the end (rather than 1 − prefix sum) keeps the
	// relative precision of small remainders.
	for i := 0; i < last; i++ {
		if !on[i] {
			continue
		}
		tail := 0.0
		for j := i + 1; j <= last; j++ {
			if on[j] {
				tail += pi[j]
			}
		}
		p, q := 0.5, 0.5 // φ and 1−φ
		if d := pi[i] + tail; d > 0 {
			p, q = pi[i]/d, tail/d
		}
		// Only degenerate proportions are clipped (to keep the incomplete
		// beta finite); the forward map's precision makes the reference's
		// 1e−12 clip unnecessary here.
		if p <= 0.5 {
			p = math.Max(p, tinyProportion)
			eps[i] = PhiInv(mathext.RegIncBeta(s.Alpha[i], after[i], p))
		} else {
			q = math.Max(q, tinyProportion)
			eps[i] = -PhiInv(mathext.RegIncBeta(after[i], s.Alpha[i], q))
		}
	}
}

// invBetaLower returns the x ∈ (0, 1/2] with I_x(a, b) = u, for
// 0 < u ≤ I_{1/2}(a, b) (so the solution lies in the lower half, where x
// carries full relative precision). lb = log B(a, b).
//
// It runs Halley's method on I_x(a,b) − u from the small-x expansion
// I_x ≈ x^a/(a·B(a,b)), which is typically 3–5 times faster than gonum's
// general-purpose inverse; if the iteration does not settle it falls back to
// mathext.InvRegIncBeta.
func invBetaLower(a, b, u, lb float64) float64 {
	x := math.Exp((math.Log(u) + math.Log(a) + lb) / a)
	if !(x > 0) || x > 0.5 {
		x = 0.5
	}
	for it := 0; it < 40; it++ {
		f := mathext.RegIncBeta(a, b, x) - u
		if f == 0 {
			return x
		}
		// I'(x) = x^{a−1}(1−x)^{b−1}/B(a,b); I''/I' = (a−1)/x − (b−1)/(1−x).
		d1 := math.Exp((a-1)*math.Log(x) + (b-1)*math.Log1p(-x) - lb)
		dx := f / d1
		c := (a-1)/x - (b-1)/(1-x)
		if den := 1 - 0.5*dx*c; den > 0.5 && den < 2 {
			dx /= den
		}
		xn := x - dx
		switch {
		case xn <= 0:
			xn = x / 8
		case xn > 0.5:
			xn = 0.5*x + 0.25
		}
		if math.Abs(xn-x) <= 1e-15*xn {
			return xn
		}
		x = xn
	}
	return mathext.InvRegIncBeta(a, b, u)
}
