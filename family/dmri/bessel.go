package dmri

import "math"

// besselSwitch is the argument above which the modified Bessel functions
// are evaluated from their large-argument asymptotic expansions instead of
// their power series. At x = 20 the smallest term of the asymptotic series
// is of order e^{−2x} ≈ 4e−18, so both branches reach full double precision
// there; below it the (all-positive) power series needs at most ~45 terms.
const besselSwitch = 20.0

// LogI0 returns log I₀(x), the logarithm of the modified Bessel function of
// the first kind of order zero, without overflow for any finite x (I₀ itself
// overflows beyond x ≈ 713). The relative error is a few ulps.
func LogI0(x float64) float64 {
	x = math.Abs(x)
	if x <= besselSwitch {
		return math.Log(i0Series(x))
	}
	return x + logI0eAsymptotic(x)
}

// logI0e returns log(I₀(x)·e^{−x}) for x ≥ 0, the scaled form the Rician
// likelihood needs to avoid cancelling two large numbers.
func logI0e(x float64) float64 {
	if x <= besselSwitch {
		return math.Log(i0Series(x)) - x
	}
	return logI0eAsymptotic(x)
}

// BesselRatio returns I₁(x)/I₀(x) = d/dx log I₀(x) for x ≥ 0 (odd in x).
func BesselRatio(x float64) float64 {
	if x < 0 {
		return -BesselRatio(-x)
	}
	if x <= besselSwitch {
		return i1Series(x) / i0Series(x)
	}
	a, c := asymptoticSums(x)
	return c / a
}

// i0Series sums I₀(x) = Σ_k (x²/4)^k / (k!)², a series of positive terms.
func i0Series(x float64) float64 {
	q := 0.25 * x * x
	term, sum := 1.0, 1.0
	for k := 1.0; k < 200; k++ {
		term *= q / (k * k)
		sum += term
		if term <= 1e-17*sum {
			break
		}
	}
	return sum
}

// i1Series sums I₁(x) = (x/2) Σ_k (x²/4)^k / (k!(k+1)!).
func i1Series(x float64) float64 {
	q := 0.25 * x * x
	term, sum := 1.0, 1.0
	for k := 1.0; k < 200; k++ {
		term *= q / (k * (k + 1))
		sum += term
		if term <= 1e-17*sum {
			break
		}
	}
	return 0.5 * x * sum
}

// logI0eAsymptotic is log(I₀(x)e^{−x}) from the asymptotic expansion
// I₀(x) ~ e^x/√(2πx) Σ_k a_k x^{−k}, a_k = a_{k−1}(2k−1)²/(8k), a_0 = 1.
func logI0eAsymptotic(x float64) float64 {
	a, _ := asymptoticSums(x)
	return math.Log(a) - 0.5*math.Log(2*math.Pi*x)
}

// asymptoticSums returns the bracketed sums of the asymptotic expansions of
// I₀ and I₁ (without the common factor e^x/√(2πx)):
// I₀: Σ a_k x^{−k}, a_k = a_{k−1}(2k−1)²/(8k);
// I₁: Σ c_k x^{−k}, c_k = c_{k−1}((2k−1)²−4)/(8k).
// The series are summed until their terms stop decreasing or fall below
// 1e−17 of the sum.
func asymptoticSums(x float64) (sumI0, sumI1 float64) {
	ta, tc := 1.0, 1.0
	sumI0, sumI1 = 1, 1
	for k := 1.0; k < 60; k++ {
		m := (2*k - 1) * (2*k - 1)
		na := ta * m / (8 * k * x)
		nc := tc * (m - 4) / (8 * k * x)
		if math.Abs(na) >= math.Abs(ta) {
			break
		}
		ta, tc = na, nc
		sumI0 += ta
		sumI1 += tc
		if math.Abs(ta) <= 1e-17*sumI0 && math.Abs(tc) <= 1e-17*math.Abs(sumI1) {
			break
		}
	}
	return sumI0, sumI1
}
