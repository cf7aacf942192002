package symbolic

import "math"

// StdFloor is the smallest per-point noise standard deviation, in the units
// of the observation y. The noise variance at x_j is
//
//	v_j = c1²·envelope(x_j)² + StdFloor²,
//
// in the simulator and in the likelihood alike. It matters only where the
// paper's noise would vanish (c1 → 0 for the priors with lower bound 0, the
// far tails of NoisePeaked and NoiseSigmoid, the zero of
// NoiseQuadraticDecreasing at x = √11, which lies off the grid): there it
// keeps the Gaussian likelihood finite and smooth instead of degenerate.
// Observations range over |y| ≈ 1–10³, so 10⁻⁶ is far below any noise the
// priors produce in practice and far above float64 rounding of y (≲10⁻¹²).
const StdFloor = 1e-6

// peakedEps is the offset in NoisePeaked's width, c3 + 10⁻³ (paper table).
const peakedEps = 1e-3

// envelope writes the deterministic noise envelope e(x_j) of noise model id
// into e.
func envelope(id int, c *[3]float64, x, e []float64) {
	e = e[:len(x)]
	c2, c3 := c[1], c[2]
	switch id {
	case idNoiseObserver:
		for j := range e {
			e[j] = 1
		}
	case idNoiseIncreasing:
		for j, v := range x {
			e[j] = v + 1
		}
	case idNoiseDecreasing:
		for j, v := range x {
			e[j] = 11 - v
		}
	case idNoiseQuadratic:
		for j, v := range x {
			e[j] = v*v + 1
		}
	case idNoiseQuadraticDecreasing:
		for j, v := range x {
			e[j] = 11 - v*v
		}
	case idNoiseExponential:
		for j, v := range x {
			e[j] = math.Exp(c2 * v)
		}
	case idNoiseSigmoid:
		for j, v := range x {
			e[j] = logistic(c2 * (v - c3))
		}
	case idNoisePeaked:
		r := 1 / (c3 + peakedEps)
		for j, v := range x {
			u := v - c2
			e[j] = math.Exp(-u * u * r)
		}
	default:
		panic("symbolic: unknown noise model")
	}
}

// envelopeGrad writes the envelope into e and its derivatives with respect
// to c2 and c3 into d2 and d3 (zero for models without those parameters).
func envelopeGrad(id int, c *[3]float64, x, e, d2, d3 []float64) {
	envelope(id, c, x, e)
	e, d2, d3 = e[:len(x)], d2[:len(x)], d3[:len(x)]
	c2, c3 := c[1], c[2]
	switch id {
	case idNoiseExponential:
		for j, v := range x {
			d2[j] = v * e[j]
			d3[j] = 0
		}
	case idNoiseSigmoid:
		for j, v := range x {
			s := e[j] * (1 - e[j])
			d2[j] = s * (v - c3)
			d3[j] = -s * c2
		}
	case idNoisePeaked:
		r := 1 / (c3 + peakedEps)
		for j, v := range x {
			u := v - c2
			d2[j] = 2 * u * r * e[j]
			d3[j] = u * u * r * r * e[j]
		}
	default:
		for j := range d2 {
			d2[j], d3[j] = 0, 0
		}
	}
}
