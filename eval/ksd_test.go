package eval

import (
	"math"
	"math/rand/v2"
	"testing"
)

// gaussSamples draws n samples of N(mu, diag(sd²)) shifted by shift (in
// units of sd) with the score of the unshifted target.
func gaussSamples(r *rand.Rand, n int, mu, sd []float64, shift float64) (x, s [][]float64) {
	x = make([][]float64, n)
	s = make([][]float64, n)
	for i := range x {
		x[i] = make([]float64, len(mu))
		s[i] = make([]float64, len(mu))
		for a := range mu {
			x[i][a] = mu[a] + sd[a]*(shift+r.NormFloat64())
			s[i][a] = -(x[i][a] - mu[a]) / (sd[a] * sd[a])
		}
	}
	return x, s
}

func TestKSDGaussian(t *testing.T) {
	// Exact samples: the U-statistic KSD² is unbiased for 0, so its mean
	// over 40 replicates lies within 4 standard errors of 0. Samples
	// shifted by 1 sd (anisotropic target, scales 0.01…10 so whitening
	// matters) give a KSD² far above the exact replicates' spread.
	r := rand.New(rand.NewPCG(4, 4))
	mu := []float64{1, -2, 0.5}
	sd := []float64{0.01, 1, 10}
	var exact []float64
	for range 40 {
		x, s := gaussSamples(r, 150, mu, sd, 0)
		_, k2, err := KSD(x, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		exact = append(exact, k2)
	}
	m, se := MeanSE(exact)
	if math.Abs(m) > 4*se {
		t.Errorf("mean KSD² of exact samples %v ± %v, want 0", m, se)
	}
	x, s := gaussSamples(r, 150, mu, sd, 1)
	shifted, k2, err := KSD(x, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	maxExact := 0.0
	for _, v := range exact {
		maxExact = max(maxExact, v)
	}
	if !(k2 > 5*maxExact) || !(shifted > 0) {
		t.Errorf("KSD² of shifted samples %v, exact samples up to %v", k2, maxExact)
	}
	// rKSD of prior-like (wide) samples against a narrow target is ≫ that
	// of exact samples: the posterior samples' rKSD is small.
	xw, sw := gaussSamples(r, 150, mu, []float64{0.1, 10, 100}, 0)
	for i := range xw {
		for a := range mu {
			sw[i][a] = -(xw[i][a] - mu[a]) / (sd[a] * sd[a])
		}
	}
	wide, _, _ := KSD(xw, sw, nil)
	xe, se2 := gaussSamples(r, 150, mu, sd, 0)
	ex, _, _ := KSD(xe, se2, nil)
	if !(ex/wide < 0.2) {
		t.Errorf("rKSD of exact samples %v (KSD %v vs wide %v)", ex/wide, ex, wide)
	}
}

// steinKernelFD evaluates the averaged Stein kernel u(z1, z2) of whitened
// points with scores s1, s2 by finite differences of the RBF kernel:
// u = s1ᵀs2 k + s1ᵀ∇₂k + s2ᵀ∇₁k + tr ∇₁∇₂k.
func steinKernelFD(z1, z2, s1, s2 []float64, hs []float64) float64 {
	const e = 1e-4
	d := len(z1)
	u := 0.0
	for _, h := range hs {
		k := func(a, b []float64) float64 {
			r2 := 0.0
			for i := range a {
				r2 += (a[i] - b[i]) * (a[i] - b[i])
			}
			return math.Exp(-r2 / (2 * h * h))
		}
		shift := func(v []float64, i int, dv float64) []float64 {
			w := append([]float64(nil), v...)
			w[i] += dv
			return w
		}
		v := k(z1, z2)
		ss := 0.0
		for i := 0; i < d; i++ {
			ss += s1[i] * s2[i]
		}
		v *= ss
		for i := 0; i < d; i++ {
			g2 := (k(z1, shift(z2, i, e)) - k(z1, shift(z2, i, -e))) / (2 * e)
			g1 := (k(shift(z1, i, e), z2) - k(shift(z1, i, -e), z2)) / (2 * e)
			h12 := (k(shift(z1, i, e), shift(z2, i, e)) - k(shift(z1, i, e), shift(z2, i, -e)) -
				k(shift(z1, i, -e), shift(z2, i, e)) + k(shift(z1, i, -e), shift(z2, i, -e))) / (4 * e * e)
			v += s1[i]*g2 + s2[i]*g1 + h12
		}
		u += v / float64(len(hs))
	}
	return u
}

func TestKSDKernelFiniteDifferences(t *testing.T) {
	// Two samples whose covariance whitening is known: for n = 2 the
	// sample covariance is Δ Δᵀ/2 (Δ = x1 − x2), singular, so the jitter
	// 10⁻³ I makes it definite; we compute L from the same formula and
	// compare KSD² = u(z1, z2) with the finite-difference Stein kernel.
	// Central differences with step 10⁻⁴ on O(1) kernels are accurate to
	// ~10⁻⁷; tolerance 10⁻⁵ relative.
	x := [][]float64{{0.3, -0.2}, {-0.1, 0.4}}
	s := [][]float64{{1.5, 0.7}, {-0.4, 2.0}}
	hs := []float64{0.5, 1, 10}
	_, k2, err := KSD(x, s, hs)
	if err != nil {
		t.Fatal(err)
	}
	// Whitening by hand: C = cov + 1e-3 I, 2×2 Cholesky.
	dx := []float64{x[0][0] - x[1][0], x[0][1] - x[1][1]}
	c00 := dx[0]*dx[0]/2 + 1e-3
	c01 := dx[0] * dx[1] / 2
	c11 := dx[1]*dx[1]/2 + 1e-3
	l00 := math.Sqrt(c00)
	l10 := c01 / l00
	l11 := math.Sqrt(c11 - l10*l10)
	white := func(v []float64) []float64 {
		z0 := v[0] / l00
		return []float64{z0, (v[1] - l10*z0) / l11}
	}
	score := func(v []float64) []float64 { // Lᵀ s
		return []float64{l00*v[0] + l10*v[1], l11 * v[1]}
	}
	want := steinKernelFD(white(x[0]), white(x[1]), score(s[0]), score(s[1]), hs)
	if math.Abs(k2-want) > 1e-5*math.Abs(want)+1e-9 {
		t.Errorf("KSD² %v, finite-difference Stein kernel %v", k2, want)
	}
}
