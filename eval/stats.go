package eval

import (
	"math"
	"math/rand/v2"
)

// ESS returns the normalised effective sample size (Σw)²/(N Σw²) ∈ (0, 1]
// of importance weights given by their logarithms (0 if none is finite).
func ESS(logw []float64) float64 {
	mx := math.Inf(-1)
	for _, l := range logw {
		if l > mx && !math.IsInf(l, 1) {
			mx = l
		}
	}
	if math.IsInf(mx, -1) || math.IsNaN(mx) {
		return 0
	}
	s1, s2 := 0.0, 0.0
	for _, l := range logw {
		w := math.Exp(l - mx)
		if math.IsNaN(w) {
			continue
		}
		s1 += w
		s2 += w * w
	}
	return s1 * s1 / (float64(len(logw)) * s2)
}

// R2 returns the coefficient of determination of est as a prediction of
// ref, 1 − Σ(est − ref)²/Σ(ref − mean ref)²: 1 for perfect agreement,
// 0 for a constant at the mean, negative for worse. Unlike a squared
// correlation it penalises offsets and scale errors. Pairs with a
// non-finite member are skipped; NaN if fewer than two pairs remain.
func R2(est, ref []float64) float64 {
	var e, r []float64
	for i := range ref {
		if isFinite(est[i]) && isFinite(ref[i]) {
			e = append(e, est[i])
			r = append(r, ref[i])
		}
	}
	if len(r) < 2 {
		return math.NaN()
	}
	m := mean(r)
	res, tot := 0.0, 0.0
	for i := range r {
		res += (e[i] - r[i]) * (e[i] - r[i])
		tot += (r[i] - m) * (r[i] - m)
	}
	return 1 - res/tot
}

// TV returns the total-variation distance ½Σ|p_i − q_i| between two
// probability vectors over the same outcomes.
func TV(p, q []float64) float64 {
	s := 0.0
	for i := range p {
		s += math.Abs(p[i] - q[i])
	}
	return s / 2
}

// Normalize returns exp(l_i)/Σ exp(l_j) for log-weights l (NaN entries get
// probability 0).
func Normalize(l []float64) []float64 {
	mx := math.Inf(-1)
	for _, v := range l {
		if v > mx {
			mx = v
		}
	}
	p := make([]float64, len(l))
	s := 0.0
	for i, v := range l {
		if math.IsNaN(v) || math.IsInf(mx, -1) {
			continue
		}
		p[i] = math.Exp(v - mx)
		s += p[i]
	}
	for i := range p {
		p[i] /= s
	}
	return p
}

// RMSE returns √(mean_i MSE_i) over per-observation mean squared errors
// (paper App. A.1).
func RMSE(mse []float64) float64 { return math.Sqrt(mean(mse)) }

// MeanSE returns the mean of x and its standard error sd/√n (NaN values
// skipped).
func MeanSE(x []float64) (m, se float64) {
	var v []float64
	for _, a := range x {
		if !math.IsNaN(a) {
			v = append(v, a)
		}
	}
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	m = mean(v)
	if len(v) < 2 {
		return m, math.NaN()
	}
	s := 0.0
	for _, a := range v {
		s += (a - m) * (a - m)
	}
	return m, math.Sqrt(s / float64(len(v)-1) / float64(len(v)))
}

// Bootstrap returns the standard deviation of stat over reps resamples
// (with replacement) of the indices 0…n−1: the Monte Carlo standard error
// of a statistic of n independent test observations. NaN replicates are
// skipped.
func Bootstrap(n, reps int, seed uint64, stat func(idx []int) float64) float64 {
	r := rand.New(rand.NewPCG(seed, 0xb0075))
	idx := make([]int, n)
	vals := make([]float64, 0, reps)
	for b := 0; b < reps; b++ {
		for i := range idx {
			idx[i] = r.IntN(n)
		}
		if v := stat(idx); !math.IsNaN(v) {
			vals = append(vals, v)
		}
	}
	if len(vals) < 2 {
		return math.NaN()
	}
	m := mean(vals)
	s := 0.0
	for _, v := range vals {
		s += (v - m) * (v - m)
	}
	return math.Sqrt(s / float64(len(vals)-1))
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
