package eval

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/prismsbi/prism/internal/quantile"
)

// GridPoints is the number of vertices of the uniform grid on [0, 1] on
// which the calibration error is evaluated (paper App. A.1).
const GridPoints = 100

// RandomizedRank returns the model-SBC value of one trial (paper App. A.1):
// with n< = #{ℓ_s < ℓ_true} and n= = #{ℓ_s = ℓ_true} among the S sampled
// log-probabilities, K ~ U{0,…,n=} and V ~ U(0,1),
// u = (n< + K + V)/(S+1). Ties are frequent in discrete spaces (the same
// mask is drawn again); the randomisation makes u exactly U(0,1) when the
// truth is distributed like the samples.
func RandomizedRank(r *rand.Rand, logqTrue float64, logqSamples []float64) float64 {
	less, eq := 0, 0
	for _, l := range logqSamples {
		switch {
		case l < logqTrue:
			less++
		case l == logqTrue:
			eq++
		}
	}
	k := r.IntN(eq + 1)
	return (float64(less+k) + r.Float64()) / float64(len(logqSamples)+1)
}

// PIT returns the parameter-SBC value of one coordinate (paper App. A.1):
// r = 1 + #{samples < truth}, u = (r − 0.5)/(S+1).
func PIT(truth float64, samples []float64) float64 {
	r := 1
	for _, s := range samples {
		if s < truth {
			r++
		}
	}
	return pitLevel(r, len(samples)+1)
}

// pitLevel returns the discrete PIT value of rank r (1…L) among L equally
// likely levels, the midpoint (r − 0.5)/L of the rank's interval: L = S + 1
// for a truth ranked among S posterior samples.
func pitLevel(r, L int) float64 { return (float64(r) - 0.5) / float64(L) }

// CalibrationError returns CE = (1/|G|) Σ_{g∈G} |F̂(g) − g| on the uniform
// grid G of GridPoints vertices 0, 1/99, …, 1, where F̂ is the empirical CDF
// of u. It returns NaN for empty u.
func CalibrationError(u []float64) float64 {
	if len(u) == 0 {
		return math.NaN()
	}
	s := slices.Clone(u)
	slices.Sort(s)
	return ceSorted(s)
}

func ceSorted(s []float64) float64 {
	n := float64(len(s))
	ce, j := 0.0, 0
	for i := 0; i < GridPoints; i++ {
		g := float64(i) / (GridPoints - 1)
		for j < len(s) && s[j] <= g {
			j++
		}
		ce += math.Abs(float64(j)/n - g)
	}
	return ce / GridPoints
}

// Band is the distribution of the calibration error of a perfectly
// calibrated posterior at a given number of values, obtained by simulation:
// its Mean and its Level quantile Upper (a CE above Upper is evidence of
// miscalibration at that level). ECDF holds the pointwise central Level
// interval of the ECDF at the grid points Z, for plotting.
type Band struct {
	N     int       `json:"n"`
	Reps  int       `json:"reps"`
	Level float64   `json:"level"`
	Mean  float64   `json:"mean"`
	Upper float64   `json:"upper"`
	Z     []float64 `json:"-"`
	Lo    []float64 `json:"-"`
	Hi    []float64 `json:"-"`
}

// UniformCEBand simulates reps sets of n independent values of a perfectly
// calibrated posterior and summarises their calibration errors. With
// ranks = 0 the values are U(0,1) (the randomised ranks of model SBC); with
// ranks = S > 0 they are the discrete PIT values (r − 0.5)/(S+1),
// r ~ U{1,…,S+1}, of parameter SBC with S samples.
func UniformCEBand(n, ranks, reps int, level float64, seed uint64) (Band, error) {
	if n < 1 || reps < 2 || !(level > 0 && level < 1) || ranks < 0 {
		return Band{}, fmt.Errorf("eval: UniformCEBand(n=%d, ranks=%d, reps=%d, level=%v)", n, ranks, reps, level)
	}
	r := rand.New(rand.NewPCG(seed, 0xca11b))
	levels := 0
	if ranks > 0 {
		levels = ranks + 1
	}
	return simulateBand(n, reps, level, levels, func(_ int, u []float64) {
		for i := range u {
			if ranks == 0 {
				u[i] = r.Float64()
			} else {
				u[i] = pitLevel(1+r.IntN(ranks+1), ranks+1)
			}
		}
	}), nil
}

// SelfConsistentCEBand simulates the parameter-SBC calibration error of a
// perfectly calibrated posterior with the dependence structure of the
// pooled PIT values kept: PIT values of the active coordinates of one trial
// are dependent (correlated posteriors), so pooling them makes the CE of a
// perfect posterior spread more than that of independent uniforms. Each
// replicate takes, in every trial t, a random one of that trial's samples
// samples[t][s] (each a vector of the trial's active coordinates) as
// pseudo-truth and computes its PIT values among the others. A draw from
// q(θ|x) is a perfectly calibrated "truth" for q, so the pooled values have
// exactly the distribution the real PIT values would have if q were the
// true posterior (with S−1 instead of S ranking samples).
func SelfConsistentCEBand(samples [][][]float64, reps int, level float64, seed uint64) (Band, error) {
	n := 0
	for t, st := range samples {
		if len(st) < 2 {
			return Band{}, fmt.Errorf("eval: SelfConsistentCEBand: trial %d has %d samples, need ≥ 2", t, len(st))
		}
		n += len(st[0])
	}
	if n == 0 || reps < 2 || !(level > 0 && level < 1) {
		return Band{}, fmt.Errorf("eval: SelfConsistentCEBand(n=%d, reps=%d, level=%v)", n, reps, level)
	}
	r := rand.New(rand.NewPCG(seed, 0x5e1f))
	levels := len(samples[0]) // the pseudo-truth's rank among S − 1 others: S levels
	for _, st := range samples {
		if len(st) != levels {
			levels = 0 // mixed sample counts: no common levels
			break
		}
	}
	return simulateBand(n, reps, level, levels, func(_ int, u []float64) {
		k := 0
		for _, st := range samples {
			j := r.IntN(len(st))
			for d := range st[j] {
				rank := 1
				for s, th := range st {
					if s != j && th[d] < st[j][d] {
						rank++
					}
				}
				u[k] = pitLevel(rank, len(st))
				k++
			}
		}
	}), nil
}

// simulateBand runs reps replicates of draw (which fills n values) and
// summarises their CEs and pointwise ECDFs. The ECDFs are taken on 201
// points of [0, 1], or, when the values are discrete on levels (r − 0.5)/L
// (levels = L > 0), at the boundaries k/L between the levels, where a
// calibrated ECDF's expectation is exactly k/L (so a plot of ECDF − z
// shows no sawtooth of the discreteness).
func simulateBand(n, reps int, level float64, levels int, draw func(rep int, u []float64)) Band {
	b := Band{N: n, Reps: reps, Level: level}
	zs := 201
	if levels > 0 {
		zs = levels + 1
	}
	b.Z = make([]float64, zs)
	for i := range b.Z {
		b.Z[i] = float64(i) / float64(zs-1)
	}
	ecdf := make([][]float64, zs)
	for i := range ecdf {
		ecdf[i] = make([]float64, reps)
	}
	ces := make([]float64, reps)
	u := make([]float64, n)
	for rep := 0; rep < reps; rep++ {
		draw(rep, u)
		slices.Sort(u)
		ces[rep] = ceSorted(u)
		j := 0
		for i, z := range b.Z {
			for j < n && u[j] <= z {
				j++
			}
			ecdf[i][rep] = float64(j) / float64(n)
		}
	}
	b.Mean = mean(ces)
	b.Upper = Quantile(ces, level)
	b.Lo = make([]float64, zs)
	b.Hi = make([]float64, zs)
	for i := range ecdf {
		b.Lo[i] = Quantile(ecdf[i], (1-level)/2)
		b.Hi[i] = Quantile(ecdf[i], (1+level)/2)
	}
	return b
}

// Quantile returns the type-7 (linear interpolation) q-quantile of x,
// ignoring NaNs; NaN if none is left.
func Quantile(x []float64, q float64) float64 { return quantile.Of(x, q) }

func mean(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}
