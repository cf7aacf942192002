package correct

import "math"

// Small dense linear algebra on row-major d×d matrices (d is the number of
// active latent dimensions, at most a few dozen): a Cholesky factor with a
// jitter fallback, triangular solves and products.

// cholesky returns the lower Cholesky factor of the symmetric matrix a
// (row-major d×d). If a is not numerically positive definite, a growing
// multiple of its mean diagonal is added until it is.
func cholesky(a []float64, d int) []float64 {
	tr := 0.0
	for i := range d {
		tr += a[i*d+i]
	}
	scale := tr / float64(max(d, 1))
	if !(scale > 0) || math.IsInf(scale, 0) {
		scale = 1
	}
	l := make([]float64, d*d)
	for jitter := 0.0; ; {
		if choleskyInto(a, d, jitter, l) {
			return l
		}
		if jitter == 0 {
			jitter = 1e-10 * scale
		} else {
			jitter *= 10
		}
	}
}

func choleskyInto(a []float64, d int, jitter float64, l []float64) bool {
	clear(l)
	for i := range d {
		for j := 0; j <= i; j++ {
			s := a[i*d+j]
			if i == j {
				s += jitter
			}
			for k := range j {
				s -= l[i*d+k] * l[j*d+k]
			}
			if i == j {
				if !(s > 0) {
					return false
				}
				l[i*d+i] = math.Sqrt(s)
			} else {
				l[i*d+j] = s / l[j*d+j]
			}
		}
	}
	return true
}

// forward solves L y = b (L lower triangular) into y.
func forward(l []float64, d int, b, y []float64) {
	for i := range d {
		s := b[i]
		for k := range i {
			s -= l[i*d+k] * y[k]
		}
		y[i] = s / l[i*d+i]
	}
}

// backward solves Lᵀ y = b into y.
func backward(l []float64, d int, b, y []float64) {
	for i := d - 1; i >= 0; i-- {
		s := b[i]
		for k := i + 1; k < d; k++ {
			s -= l[k*d+i] * y[k]
		}
		y[i] = s / l[i*d+i]
	}
}

// lowerMul writes L v into y.
func lowerMul(l []float64, d int, v, y []float64) {
	for i := range d {
		s := 0.0
		for k := 0; k <= i; k++ {
			s += l[i*d+k] * v[k]
		}
		y[i] = s
	}
}

// logDiag returns Σ log L_ii = ½ log det(L Lᵀ).
func logDiag(l []float64, d int) float64 {
	s := 0.0
	for i := range d {
		s += math.Log(l[i*d+i])
	}
	return s
}

// weightedCov returns the mean and covariance (row-major) of points z with
// normalised weights w.
func weightedCov(z [][]float64, w []float64, d int) (mean, cov []float64) {
	mean = make([]float64, d)
	cov = make([]float64, d*d)
	for i, p := range z {
		for a := range d {
			mean[a] += w[i] * p[a]
		}
	}
	for i, p := range z {
		for a := range d {
			da := p[a] - mean[a]
			for b := 0; b <= a; b++ {
				cov[a*d+b] += w[i] * da * (p[b] - mean[b])
			}
		}
	}
	for a := range d {
		for b := 0; b < a; b++ {
			cov[b*d+a] = cov[a*d+b]
		}
	}
	return mean, cov
}
