package eval

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/family/lingauss"
	"github.com/prismsbi/prism/posterior"
	"gonum.org/v1/gonum/mat"
)

func TestESSHand(t *testing.T) {
	// w = (1, 3): (Σw)²/(NΣw²) = 16/(2·10) = 0.8.
	if e := ESS([]float64{0, math.Log(3)}); math.Abs(e-0.8) > 1e-12 {
		t.Errorf("ESS %v, want 0.8", e)
	}
	if e := ESS([]float64{-5, -5, -5}); math.Abs(e-1) > 1e-12 {
		t.Errorf("ESS of equal weights %v", e)
	}
	if e := ESS([]float64{0, -1000, -1000, -1000}); math.Abs(e-0.25) > 1e-12 {
		t.Errorf("ESS of one dominant weight %v, want 1/4", e)
	}
	if e := ESS([]float64{math.Inf(-1)}); e != 0 {
		t.Errorf("ESS of zero weights %v", e)
	}
}

// TestExactGaussianImportance: on lingauss, proposals from the exact
// posterior N(m, S) with their exact log-density give constant weights
// p(x|θ)p(θ)/q(θ) = p(x|M): ESS = 1 and the IS evidence equals the closed
// form up to rounding (10⁻⁹). Prior proposals give an unbiased but noisy
// estimate, within 5 delta-method SEs of the closed form.
func TestExactGaussianImportance(t *testing.T) {
	f := lingauss.New()
	r := family.SampleRNG(3, 0)
	mask := []bool{true, true, false, true, false, true, true}
	theta := make([]float64, f.Layout().DMax)
	for i := range theta {
		theta[i] = r.NormFloat64()
	}
	d := f.GridDesign()
	x := make([]float64, d.N)
	f.Simulate(r, d, theta, mask, x)
	want := f.LogEvidence(x, mask)
	m, S := f.ParamPosterior(x, mask)
	act := make([]bool, len(theta))
	f.Layout().Active(mask, act)
	idx := activeIdx(act)
	sym := mat.NewSymDense(len(idx), nil)
	mu := make([]float64, len(idx))
	for a, i := range idx {
		mu[a] = m[i]
		for b, j := range idx {
			sym.SetSym(a, b, S[i][j])
		}
	}
	var ch mat.Cholesky
	if !ch.Factorize(sym) {
		t.Fatal("posterior covariance not positive definite")
	}
	var L mat.TriDense
	ch.LTo(&L)
	k := len(idx)
	logNorm := -0.5*float64(k)*math.Log(2*math.Pi) - 0.5*ch.LogDet()
	n := 500
	logw := make([]float64, n)
	th := make([]float64, len(theta))
	z := make([]float64, k)
	for j := range logw {
		// θ = m + L z, log q = log N(z; 0, I) − log|L|.
		lq := logNorm
		for a := range z {
			z[a] = r.NormFloat64()
			lq -= 0.5 * z[a] * z[a]
		}
		clear(th)
		for a, i := range idx {
			v := mu[a]
			for b := 0; b <= a; b++ {
				v += L.At(a, b) * z[b]
			}
			th[i] = v
		}
		logw[j] = f.LogLikelihood(d, x, th, mask, nil) + family.LogPriorLatent(th, act) - lq
	}
	if e := ESS(logw); math.Abs(e-1) > 1e-9 {
		t.Errorf("ESS of exact proposals %v, want 1", e)
	}
	got, _ := posterior.LogMeanExp(logw)
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("IS evidence %v, closed form %v", got, want)
	}
	// Prior proposals.
	n = 200000
	logw = make([]float64, n)
	for j := range logw {
		for _, i := range idx {
			th[i] = r.NormFloat64()
		}
		logw[j] = f.LogLikelihood(d, x, th, mask, nil)
	}
	got, se := posterior.LogMeanExp(logw)
	if math.Abs(got-want) > 5*se {
		t.Errorf("prior-proposal IS evidence %v ± %v, closed form %v", got, se, want)
	}
}

func TestR2TVNormalize(t *testing.T) {
	ref := []float64{1, 2, 3, 4}
	if v := R2(ref, ref); v != 1 {
		t.Errorf("R² of identical %v", v)
	}
	// est = mean: R² = 0. est = ref + 1: 1 − 4/5 = 0.2.
	if v := R2([]float64{2.5, 2.5, 2.5, 2.5}, ref); math.Abs(v) > 1e-12 {
		t.Errorf("R² of the mean %v", v)
	}
	if v := R2([]float64{2, 3, 4, 5}, ref); math.Abs(v-0.2) > 1e-12 {
		t.Errorf("R² with offset %v, want 0.2", v)
	}
	if v := R2([]float64{math.NaN(), 2, 3, 4}, ref); v != 1 {
		t.Errorf("R² skipping NaN %v", v)
	}
	if v := TV([]float64{0.5, 0.5, 0}, []float64{0.2, 0.3, 0.5}); math.Abs(v-0.5) > 1e-12 {
		t.Errorf("TV %v, want 0.5", v)
	}
	p := Normalize([]float64{math.Log(1), math.Log(3), math.Inf(-1)})
	if math.Abs(p[0]-0.25) > 1e-12 || math.Abs(p[1]-0.75) > 1e-12 || p[2] != 0 {
		t.Errorf("Normalize %v", p)
	}
}

func TestBootstrapSE(t *testing.T) {
	// The bootstrap SE of a mean of n standard normals is 1/√n; with 2000
	// resamples its relative Monte Carlo error is ~2 %, and the sample SD
	// of 400 values deviates by ~4 %: 12 % tolerance.
	r := rand.New(rand.NewPCG(9, 9))
	x := make([]float64, 400)
	for i := range x {
		x[i] = r.NormFloat64()
	}
	se := Bootstrap(len(x), 2000, 1, func(idx []int) float64 { return mean(pick(x, idx)) })
	if math.Abs(se*math.Sqrt(400)-1) > 0.12 {
		t.Errorf("bootstrap SE %v, want %v", se, 1/math.Sqrt(400))
	}
	_, mse := MeanSE(x)
	if math.Abs(mse/se-1) > 0.12 {
		t.Errorf("MeanSE %v vs bootstrap %v", mse, se)
	}
	if v := RMSE([]float64{1, 3}); math.Abs(v-math.Sqrt(2)) > 1e-12 {
		t.Errorf("RMSE %v", v)
	}
}

func TestClassificationHand(t *testing.T) {
	truth := []int{0, 0, 1, 1, 2, 2}
	pred := []int{0, 1, 1, 1, 2, 0}
	cm, err := Confusion(truth, pred, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float64{{1, 1, 0, 0}, {0, 2, 0, 0}, {1, 0, 1, 0}, {0, 0, 0, 0}}
	for i := range want {
		for j := range want[i] {
			if cm[i][j] != want[i][j] {
				t.Fatalf("confusion %v, want %v", cm, want)
			}
		}
	}
	// Class 3 has no support and is not averaged. Precision 1/2, 2/3, 1;
	// recall 1/2, 1, 1/2; F1 1/2, 4/5, 2/3.
	s := MacroScores(cm)
	if s.Classes != 3 || math.Abs(s.Precision-(0.5+2.0/3+1)/3) > 1e-12 ||
		math.Abs(s.Recall-2.0/3) > 1e-12 || math.Abs(s.F1-(0.5+0.8+2.0/3)/3) > 1e-12 {
		t.Errorf("macro scores %+v", s)
	}
	scores := [][]float64{{3, 2, 1}, {1, 3, 2}, {1, 2, 3}, {3, 3, 1}}
	tr := []int{0, 2, 0, 1}
	// Ranks of the truth: 1st, 2nd, 3rd, 2nd (tie with class 0 goes to 0).
	if a := TopKAccuracy(scores, tr, 1); a != 0.25 {
		t.Errorf("top-1 %v", a)
	}
	if a := TopKAccuracy(scores, tr, 2); a != 0.75 {
		t.Errorf("top-2 %v", a)
	}
	if _, err := Confusion([]int{0}, []int{5}, 3); err == nil {
		t.Error("no error for a label outside the classes")
	}
}

// TestSubspaceMetricsRanks checks the per-observation ranks of the true
// model and the figures derived from them against ranks counted by hand.
func TestSubspaceMetricsRanks(t *testing.T) {
	scores := [][]float64{{3, 2, 1}, {1, 3, 2}, {1, 2, 3}, {3, 3, 1}}
	tr := []int{0, 2, 0, 1}
	// 1st; 2nd (3 > 2); 3rd; 2nd (the tie with class 0 goes to class 0).
	want := []int{1, 2, 3, 2}
	r, err := subspaceMetrics(scores, tr, 3, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if r.Ranks[i] != want[i] {
			t.Fatalf("ranks %v, want %v", r.Ranks, want)
		}
	}
	if r.MeanRank.Value != 2 || r.Top1.Value != 0.25 {
		t.Errorf("mean rank %v, top-1 %v; want 2 and 0.25", r.MeanRank.Value, r.Top1.Value)
	}
}
