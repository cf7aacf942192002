package symbolic

import "math"

// This file evaluates the 42 base functions and their parameter derivatives
// over a whole vector of abscissae. Each function is one tight loop over the
// points (no per-point dispatch), which is what makes simulating tens of
// thousands of observations per second possible.

// tanhSech returns tanh(t) and sech(t) from a single exponential,
// e = exp(−2|t|) computed as 1 + expm1(−2|t|) so that tanh keeps full
// relative precision near 0.
func tanhSech(t float64) (th, sech float64) {
	a := math.Abs(t)
	m := math.Expm1(-2 * a) // e^{−2a} − 1 ∈ (−1, 0]
	den := 2 + m            // 1 + e^{−2a}
	th = -m / den
	if t < 0 {
		th = -th
	}
	sech = 2 * math.Exp(-a) / den
	return th, sech
}

// logistic returns 1/(1+exp(−t)) without overflow.
func logistic(t float64) float64 {
	if t >= 0 {
		return 1 / (1 + math.Exp(-t))
	}
	e := math.Exp(t)
	return e / (1 + e)
}

// softplus returns log(1+exp(t)) without overflow and with full precision
// for large negative t.
func softplus(t float64) float64 {
	if t > 0 {
		return t + math.Log1p(math.Exp(-t))
	}
	return math.Log1p(math.Exp(t))
}

// addBasis adds g_id(x_j | c) to out[j] for every point.
func addBasis(id int, c *[3]float64, x, out []float64) {
	out = out[:len(x)]
	c1, c2, c3 := c[0], c[1], c[2]
	switch id {
	case idLinear:
		for j, v := range x {
			out[j] += c1 * v
		}
	case idQuadratic:
		for j, v := range x {
			out[j] += c1 * v * v
		}
	case idShiftedSquare:
		for j, v := range x {
			s := c1 + v
			out[j] += s * s
		}
	case idCubic:
		for j, v := range x {
			out[j] += c1 * v * v * v
		}
	case idSinusoidal:
		for j, v := range x {
			out[j] += c1 * math.Sin(c2*v)
		}
	case idCosinusoidal:
		for j, v := range x {
			out[j] += c1 * math.Cos(c2*v)
		}
	case idConstantWide, idConstantPositive:
		for j := range out {
			out[j] += c1
		}
	case idTanhRight:
		for j, v := range x {
			th, _ := tanhSech(v - c2)
			out[j] += c1 * th
		}
	case idTanhLeft:
		for j, v := range x {
			th, _ := tanhSech(c2 - v)
			out[j] += c1 * th
		}
	case idGaussianBump:
		for j, v := range x {
			u := v - c2
			out[j] += c1 * math.Exp(-u*u)
		}
	case idGaussianWide:
		for j, v := range x {
			u := v - c2
			out[j] += c1 * math.Exp(-u*u*0.125)
		}
	case idRampUp:
		for j, v := range x {
			if v >= c2 {
				out[j] += c1 * v
			}
		}
	case idRampDown:
		for j, v := range x {
			if v <= c2 {
				out[j] += c1 * (c2 - v)
			}
		}
	case idQuarticScaled:
		k := c1 * 1e-4
		for j, v := range x {
			v2 := v * v
			out[j] += k * v2 * v2
		}
	case idQuinticScaled:
		k := c1 * 1e-5
		for j, v := range x {
			v2 := v * v
			out[j] += k * v2 * v2 * v
		}
	case idSinusoidalPhase:
		for j, v := range x {
			out[j] += c1 * math.Sin(c2*v+c3)
		}
	case idCosinusoidalPhase:
		for j, v := range x {
			out[j] += c1 * math.Cos(c2*v+c3)
		}
	case idExponentialDecay:
		for j, v := range x {
			out[j] += c1 * math.Exp(-c2*v)
		}
	case idSaturatingExponential:
		for j, v := range x {
			out[j] -= c1 * math.Expm1(-c2*v)
		}
	case idLogarithmic:
		for j, v := range x {
			out[j] += c1 * math.Log(v+c2)
		}
	case idSquareRoot:
		for j, v := range x {
			out[j] += c1 * math.Sqrt(v+c2)
		}
	case idReciprocal:
		for j, v := range x {
			out[j] += c1 / (v + c2)
		}
	case idAbsoluteValue:
		for j, v := range x {
			out[j] += c1 * math.Abs(v-c2)
		}
	case idInverseQuadratic:
		for j, v := range x {
			u := v - c3
			out[j] += c1 / (1 + c2*u*u)
		}
	case idLorentzian:
		r := 1 / c3
		for j, v := range x {
			u := (v - c2) * r
			out[j] += c1 / (1 + u*u)
		}
	case idSigmoid:
		for j, v := range x {
			out[j] += c1 * logistic(c2*(v-c3))
		}
	case idDampedSinusoidal:
		for j, v := range x {
			out[j] += c1 * math.Exp(-c2*v) * math.Sin(c3*v)
		}
	case idDampedCosinusoidal:
		for j, v := range x {
			out[j] += c1 * math.Exp(-c2*v) * math.Cos(c3*v)
		}
	case idTanhCentered:
		for j, v := range x {
			th, _ := tanhSech(c2 * (v - c3))
			out[j] += c1 * th
		}
	case idExponentialGrowth:
		for j, v := range x {
			out[j] += c1 * math.Exp(c2*v)
		}
	case idPowerLawDecay:
		for j, v := range x {
			out[j] += c1 * math.Exp(-c3*math.Log(v+c2))
		}
	case idArctangentStep:
		for j, v := range x {
			out[j] += c1 * math.Atan(c2*(v-c3))
		}
	case idHyperbolicSecant:
		for j, v := range x {
			e := math.Exp(-math.Abs(c2 * (v - c3)))
			out[j] += c1 * 2 * e / (1 + e*e)
		}
	case idSincDecay:
		for j, v := range x {
			out[j] += c1 * math.Sin(c2*v) / (v + c3)
		}
	case idAbsoluteSinusoidal:
		for j, v := range x {
			out[j] += c1 * math.Abs(math.Sin(c2*v+c3))
		}
	case idRectifiedLinear:
		for j, v := range x {
			if v > c2 {
				out[j] += c1 * (v - c2)
			}
		}
	case idSoftplus:
		k := c1 / c2
		for j, v := range x {
			out[j] += k * softplus(c2*(v-c3))
		}
	case idGompertz:
		for j, v := range x {
			out[j] += c1 * math.Exp(-c2*math.Exp(-c3*v))
		}
	case idLinearFractional:
		for j, v := range x {
			out[j] += c1 * v / (1 + c2*v)
		}
	case idSineSquared:
		for j, v := range x {
			s := math.Sin(c2 * v)
			out[j] += c1 * s * s
		}
	case idTriangularBump:
		r := 1 / c3
		for j, v := range x {
			if t := 1 - math.Abs(v-c2)*r; t > 0 {
				out[j] += c1 * t
			}
		}
	default:
		panic("symbolic: unknown base function")
	}
}

// gradBasis returns g_i = Σ_j w_j ∂g_id(x_j | c)/∂c_i for the function's
// parameters (entries beyond its parameter count are zero). At the kinks of
// the piecewise functions it uses the one-sided derivative of the branch
// that addBasis evaluates; RampUp's jump at x = c2 contributes no derivative
// with respect to c2 (the output is piecewise constant in c2 on any finite
// set of points).
func gradBasis(id int, c *[3]float64, x, w []float64) (g [3]float64) {
	w = w[:len(x)]
	c1, c2, c3 := c[0], c[1], c[2]
	var g0, g1, g2 float64
	switch id {
	case idLinear:
		for j, v := range x {
			g0 += w[j] * v
		}
	case idQuadratic:
		for j, v := range x {
			g0 += w[j] * v * v
		}
	case idShiftedSquare:
		for j, v := range x {
			g0 += w[j] * 2 * (c1 + v)
		}
	case idCubic:
		for j, v := range x {
			g0 += w[j] * v * v * v
		}
	case idSinusoidal:
		for j, v := range x {
			s, co := math.Sincos(c2 * v)
			g0 += w[j] * s
			g1 += w[j] * v * co
		}
		g1 *= c1
	case idCosinusoidal:
		for j, v := range x {
			s, co := math.Sincos(c2 * v)
			g0 += w[j] * co
			g1 -= w[j] * v * s
		}
		g1 *= c1
	case idConstantWide, idConstantPositive:
		for _, wj := range w {
			g0 += wj
		}
	case idTanhRight:
		for j, v := range x {
			th, sh := tanhSech(v - c2)
			g0 += w[j] * th
			g1 -= w[j] * sh * sh
		}
		g1 *= c1
	case idTanhLeft:
		for j, v := range x {
			th, sh := tanhSech(c2 - v)
			g0 += w[j] * th
			g1 += w[j] * sh * sh
		}
		g1 *= c1
	case idGaussianBump:
		for j, v := range x {
			u := v - c2
			e := math.Exp(-u * u)
			g0 += w[j] * e
			g1 += w[j] * e * 2 * u
		}
		g1 *= c1
	case idGaussianWide:
		for j, v := range x {
			u := v - c2
			e := math.Exp(-u * u * 0.125)
			g0 += w[j] * e
			g1 += w[j] * e * 0.25 * u
		}
		g1 *= c1
	case idRampUp:
		for j, v := range x {
			if v >= c2 {
				g0 += w[j] * v
			}
		}
	case idRampDown:
		for j, v := range x {
			if v <= c2 {
				g0 += w[j] * (c2 - v)
				g1 += w[j]
			}
		}
		g1 *= c1
	case idQuarticScaled:
		for j, v := range x {
			v2 := v * v
			g0 += w[j] * v2 * v2
		}
		g0 *= 1e-4
	case idQuinticScaled:
		for j, v := range x {
			v2 := v * v
			g0 += w[j] * v2 * v2 * v
		}
		g0 *= 1e-5
	case idSinusoidalPhase:
		for j, v := range x {
			s, co := math.Sincos(c2*v + c3)
			g0 += w[j] * s
			g1 += w[j] * v * co
			g2 += w[j] * co
		}
		g1 *= c1
		g2 *= c1
	case idCosinusoidalPhase:
		for j, v := range x {
			s, co := math.Sincos(c2*v + c3)
			g0 += w[j] * co
			g1 -= w[j] * v * s
			g2 -= w[j] * s
		}
		g1 *= c1
		g2 *= c1
	case idExponentialDecay:
		for j, v := range x {
			e := math.Exp(-c2 * v)
			g0 += w[j] * e
			g1 -= w[j] * v * e
		}
		g1 *= c1
	case idSaturatingExponential:
		for j, v := range x {
			m := math.Expm1(-c2 * v)
			g0 -= w[j] * m
			g1 += w[j] * v * (1 + m)
		}
		g1 *= c1
	case idLogarithmic:
		for j, v := range x {
			g0 += w[j] * math.Log(v+c2)
			g1 += w[j] / (v + c2)
		}
		g1 *= c1
	case idSquareRoot:
		for j, v := range x {
			s := math.Sqrt(v + c2)
			g0 += w[j] * s
			g1 += w[j] / s
		}
		g1 *= 0.5 * c1
	case idReciprocal:
		for j, v := range x {
			r := 1 / (v + c2)
			g0 += w[j] * r
			g1 -= w[j] * r * r
		}
		g1 *= c1
	case idAbsoluteValue:
		for j, v := range x {
			u := v - c2
			g0 += w[j] * math.Abs(u)
			if u > 0 {
				g1 -= w[j]
			} else if u < 0 {
				g1 += w[j]
			}
		}
		g1 *= c1
	case idInverseQuadratic:
		for j, v := range x {
			u := v - c3
			r := 1 / (1 + c2*u*u)
			g0 += w[j] * r
			g1 -= w[j] * u * u * r * r
			g2 += w[j] * u * r * r
		}
		g1 *= c1
		g2 *= 2 * c1 * c2
	case idLorentzian:
		ri := 1 / c3
		for j, v := range x {
			u := (v - c2) * ri
			r := 1 / (1 + u*u)
			g0 += w[j] * r
			g1 += w[j] * u * r * r
			g2 += w[j] * u * u * r * r
		}
		g1 *= 2 * c1 * ri
		g2 *= 2 * c1 * ri
	case idSigmoid:
		for j, v := range x {
			u := v - c3
			s := logistic(c2 * u)
			d := w[j] * s * (1 - s)
			g0 += w[j] * s
			g1 += d * u
			g2 += d
		}
		g1 *= c1
		g2 *= -c1 * c2
	case idDampedSinusoidal:
		for j, v := range x {
			e := math.Exp(-c2 * v)
			s, co := math.Sincos(c3 * v)
			g0 += w[j] * e * s
			g1 -= w[j] * v * e * s
			g2 += w[j] * v * e * co
		}
		g1 *= c1
		g2 *= c1
	case idDampedCosinusoidal:
		for j, v := range x {
			e := math.Exp(-c2 * v)
			s, co := math.Sincos(c3 * v)
			g0 += w[j] * e * co
			g1 -= w[j] * v * e * co
			g2 -= w[j] * v * e * s
		}
		g1 *= c1
		g2 *= c1
	case idTanhCentered:
		for j, v := range x {
			u := v - c3
			th, sh := tanhSech(c2 * u)
			d := w[j] * sh * sh
			g0 += w[j] * th
			g1 += d * u
			g2 += d
		}
		g1 *= c1
		g2 *= -c1 * c2
	case idExponentialGrowth:
		for j, v := range x {
			e := math.Exp(c2 * v)
			g0 += w[j] * e
			g1 += w[j] * v * e
		}
		g1 *= c1
	case idPowerLawDecay:
		for j, v := range x {
			l := math.Log(v + c2)
			p := math.Exp(-c3 * l)
			g0 += w[j] * p
			g1 += w[j] * p / (v + c2)
			g2 += w[j] * p * l
		}
		g1 *= -c1 * c3
		g2 *= -c1
	case idArctangentStep:
		for j, v := range x {
			u := v - c3
			t := c2 * u
			r := w[j] / (1 + t*t)
			g0 += w[j] * math.Atan(t)
			g1 += r * u
			g2 += r
		}
		g1 *= c1
		g2 *= -c1 * c2
	case idHyperbolicSecant:
		for j, v := range x {
			u := v - c3
			th, sh := tanhSech(c2 * u)
			d := w[j] * sh * th
			g0 += w[j] * sh
			g1 += d * u
			g2 += d
		}
		g1 *= -c1
		g2 *= c1 * c2
	case idSincDecay:
		for j, v := range x {
			s, co := math.Sincos(c2 * v)
			r := 1 / (v + c3)
			g0 += w[j] * s * r
			g1 += w[j] * v * co * r
			g2 -= w[j] * s * r * r
		}
		g1 *= c1
		g2 *= c1
	case idAbsoluteSinusoidal:
		for j, v := range x {
			s, co := math.Sincos(c2*v + c3)
			if s < 0 {
				s, co = -s, -co
			}
			g0 += w[j] * s
			g1 += w[j] * v * co
			g2 += w[j] * co
		}
		g1 *= c1
		g2 *= c1
	case idRectifiedLinear:
		for j, v := range x {
			if v > c2 {
				g0 += w[j] * (v - c2)
				g1 -= w[j]
			}
		}
		g1 *= c1
	case idSoftplus:
		// g = c1·sp(c2 u)/c2 with u = x − c3:
		// ∂g/∂c2 = c1·(σ(c2 u)·u/c2 − sp(c2 u)/c2²), ∂g/∂c3 = −c1·σ(c2 u).
		ri := 1 / c2
		var sp float64
		for j, v := range x {
			u := v - c3
			t := c2 * u
			s := logistic(t)
			p := softplus(t)
			sp += w[j] * p
			g1 += w[j] * s * u
			g2 -= w[j] * s
		}
		g0 = sp * ri
		g1 = c1 * ri * (g1 - sp*ri)
		g2 *= c1
	case idGompertz:
		for j, v := range x {
			q := math.Exp(-c3 * v)
			e := math.Exp(-c2 * q)
			g0 += w[j] * e
			g1 -= w[j] * e * q
			g2 += w[j] * e * q * v
		}
		g1 *= c1
		g2 *= c1 * c2
	case idLinearFractional:
		for j, v := range x {
			r := 1 / (1 + c2*v)
			g0 += w[j] * v * r
			g1 -= w[j] * v * v * r * r
		}
		g1 *= c1
	case idSineSquared:
		for j, v := range x {
			s, co := math.Sincos(c2 * v)
			g0 += w[j] * s * s
			g1 += w[j] * v * s * co
		}
		g1 *= 2 * c1
	case idTriangularBump:
		ri := 1 / c3
		for j, v := range x {
			u := v - c2
			a := math.Abs(u)
			if t := 1 - a*ri; t > 0 {
				g0 += w[j] * t
				if u > 0 {
					g1 += w[j]
				} else if u < 0 {
					g1 -= w[j]
				}
				g2 += w[j] * a
			}
		}
		g1 *= c1 * ri
		g2 *= c1 * ri * ri
	default:
		panic("symbolic: unknown base function")
	}
	return [3]float64{g0, g1, g2}
}
