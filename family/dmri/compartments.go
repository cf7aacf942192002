package dmri

import "math"

// Compartment signal models. Every function takes the b-value b in s/mm²,
// a unit gradient direction g and diffusivities in mm²/s, and returns the
// normalised signal S/S0 of one compartment (paper Table "dMRI signal
// models").

// BallSignal is the isotropic Ball compartment exp(−b·d).
func BallSignal(b, d float64) float64 { return math.Exp(-b * d) }

// StickSignal is the Stick compartment exp(−b·d·(g·n)²) with fibre
// direction n.
func StickSignal(b float64, g, n [3]float64, d float64) float64 {
	c := dot(g, n)
	return math.Exp(-b * d * c * c)
}

// ZeppelinSignal is the axially symmetric tensor compartment
// exp(−b[d∥(g·n)² + d⊥(1−(g·n)²)]) with axis n.
func ZeppelinSignal(b float64, g, n [3]float64, dPar, dPerp float64) float64 {
	c := dot(g, n)
	c *= c
	return math.Exp(-b * (dPar*c + dPerp*(1-c)))
}

// TensorSignal is the full diffusion tensor compartment exp(−b·gᵀDg).
func TensorSignal(b float64, g [3]float64, D [3][3]float64) float64 {
	return math.Exp(-b * quadForm(g, D))
}

// GammaSignal is the multi-shell extension of Jbabdi et al. (2012): the
// mono-exponential exp(−b·c·D) averaged over a Gamma-distributed
// diffusivity D with mean d and standard deviation dStd,
//
//	E[exp(−b c D)] = (1 + b c dStd²/d)^{−(d/dStd)²},
//
// with c = 1 for the Ball and c = (g·n)² for a Stick. As dStd → 0 it tends
// to exp(−b·c·d).
func GammaSignal(b, c, d, dStd float64) float64 {
	e, _, _, _ := gammaExponent(b, c, d, dStd)
	return math.Exp(-e)
}

// gammaExponent returns E = (d/s)²·log(1 + b c s²/d), the negative log of
// GammaSignal, and its partial derivatives with respect to d, s and c.
//
// With t = b c s²/d and L(t) = log1p(t)/t, E = b c d L(t), which stays
// accurate for s → 0 (no division by s). The derivatives are
//
//	∂E/∂d = b c (2L(t) − 1/(1+t)),
//	∂E/∂s = (2 b c d/s)(1/(1+t) − L(t)),
//	∂E/∂c = b d/(1+t).
func gammaExponent(b, c, d, s float64) (e, dd, ds, dc float64) {
	if d <= 0 {
		// A Gamma law with mean 0 is a point mass at zero diffusivity.
		return 0, b * c, 0, 0
	}
	bc := b * c
	t := bc * s * s / d
	var l, diff float64 // L(t) and 1/(1+t) − L(t)
	if t < 1e-3 {
		// Series: L = Σ (−t)^n/(n+1); 1/(1+t) − L = Σ_{n≥1} (−1)^n n tⁿ/(n+1).
		// Truncation after t⁶ leaves a relative error below t⁶ ≤ 1e−18.
		l = 1 + t*(-1.0/2+t*(1.0/3+t*(-1.0/4+t*(1.0/5+t*(-1.0/6+t*(1.0/7))))))
		diff = t * (-1.0/2 + t*(2.0/3+t*(-3.0/4+t*(4.0/5+t*(-5.0/6+t*(6.0/7))))))
	} else {
		l = math.Log1p(t) / t
		diff = 1/(1+t) - l
	}
	e = bc * d * l
	dd = bc * (2*l - 1/(1+t))
	if s > 0 {
		ds = 2 * bc * d / s * diff
	}
	dc = b * d / (1 + t)
	return e, dd, ds, dc
}

func dot(a, b [3]float64) float64 { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }

func quadForm(g [3]float64, D [3][3]float64) float64 {
	return D[0][0]*g[0]*g[0] + D[1][1]*g[1]*g[1] + D[2][2]*g[2]*g[2] +
		2*(D[0][1]*g[0]*g[1]+D[0][2]*g[0]*g[2]+D[1][2]*g[1]*g[2])
}
