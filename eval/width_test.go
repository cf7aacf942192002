package eval

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat"
)

// TestCentralExpected: with S samples the PIT levels are (r − 0.5)/(S+1);
// counted by hand, S = 3 has levels 1/8, 3/8, 5/8, 7/8 (two of four in the
// middle half), S = 100 has r = 26…76 (51 of 101), and large S tends to 1/2.
func TestCentralExpected(t *testing.T) {
	for _, c := range []struct {
		S    int
		want float64
	}{{3, 0.5}, {100, 51.0 / 101}, {4, 3.0 / 5}} {
		if got := centralExpected(c.S); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("S = %d: %v, want %v", c.S, got, c.want)
		}
	}
}

// TestWidthCalibration simulates parameter SBC in two groups of trials:
// sharp posteriors (SD 0.01) whose draws are 1.5 times too wide, and broad
// ones (SD 0.5) that are exact. The sharp bin must be outside its band and
// called too wide (its central-half fraction is 2Φ(0.674·1.5) − 1 ≈ 0.69
// against 0.5, eight binomial SEs away at 600 values), the broad bin inside
// and without a verdict; narrowing the draws instead (0.6 times) must give
// "too narrow", and moving them by half an SD "too low" or "too high".
func TestWidthCalibration(t *testing.T) {
	const S, n = 50, 600
	run := func(scale, shift float64) []WidthCalibration {
		r := rand.New(rand.NewPCG(7, 7))
		var u, sd []float64
		col := make([]float64, S)
		for _, g := range []struct{ w, k float64 }{{0.01, scale}, {0.5, 1}} {
			shift := shift
			if g.w > 0.1 {
				shift = 0 // only the sharp posteriors move
			}
			for range n {
				truth := g.w * r.NormFloat64() // posterior N(0, w²), truth drawn from it
				for i := range col {
					col[i] = g.k*g.w*r.NormFloat64() - shift*g.w
				}
				u = append(u, PIT(truth, col))
				sd = append(sd, stat.StdDev(col, nil))
			}
		}
		return testWidthCalibration(t, u, sd, S, 400)
	}
	ws := run(1.5, 0)
	if len(ws) != 2 {
		t.Fatalf("%d bins, want 2 (sharp SDs near 0.015, broad near 0.5): %+v", len(ws), ws)
	}
	sharp, broad := ws[0], ws[1]
	if sharp.SDLo != 0 || *sharp.SDHi != 0.03 || broad.SDLo != 0.3 || broad.SDHi != nil {
		t.Errorf("bins %s and %s", sharp.Label(), broad.Label())
	}
	if sharp.Inside || sharp.Verdict != "too wide" || sharp.Central.Value < 0.6 {
		t.Errorf("over-wide sharp posteriors: %+v", sharp)
	}
	if !broad.Inside || broad.Verdict != "" {
		t.Errorf("exact broad posteriors: %+v", broad)
	}
	if s := WidthSummary(ws); !strings.Contains(s, "too wide") || !strings.Contains(s, "sd ≥ 0.3") {
		t.Errorf("summary %q", s)
	}
	if w := run(0.6, 0)[0]; w.Verdict != "too narrow" || w.Inside {
		t.Errorf("over-narrow sharp posteriors: %+v", w)
	}
	// Draws of the right width but half an SD too low: the truth's PIT is
	// Φ(z + 0.5), z ~ N(0, 1), with mean Φ(0.5/√2) ≈ 0.64, twelve SEs above
	// 1/2 at 600 values (a shift also empties the middle half a little,
	// to Φ(0.174) − Φ(−1.174) ≈ 0.45, so "too narrow" may come too).
	if w := run(1, 0.5)[0]; !strings.Contains(w.Verdict, "too low") || w.MeanPIT.Value < 0.6 {
		t.Errorf("sharp posteriors shifted low: %+v", w)
	}
	if w := run(1, -0.5)[0]; !strings.Contains(w.Verdict, "too high") || w.MeanPIT.Value > 0.4 {
		t.Errorf("sharp posteriors shifted high: %+v", w)
	}
	if w := run(1, 0)[0]; w.Verdict != "" {
		t.Errorf("exact sharp posteriors: %+v", w)
	}
	if _, err := widthCalibration([]float64{0.5}, nil, S, nil, nil); err == nil {
		t.Error("mismatched lengths accepted")
	}
}

// TestMeanPIT: the S + 1 PIT levels have mean 1/2 and variance
// ((S+1)² − 1)/(12(S+1)²), checked against the levels themselves.
func TestMeanPIT(t *testing.T) {
	const S = 3
	u := []float64{1.0 / 8, 3.0 / 8, 5.0 / 8, 7.0 / 8}
	v := 0.0
	for _, x := range u {
		v += (x - 0.5) * (x - 0.5) / 4
	}
	m := meanPIT(u, S)
	if math.Abs(m.Value-0.5) > 1e-15 || math.Abs(m.SE-math.Sqrt(v/4)) > 1e-15 {
		t.Errorf("meanPIT = %+v, want 0.5 ± %v", m, math.Sqrt(v/4))
	}
}

// TestWidthSelectionBias: exact Gaussian posteriors whose SDs spread
// log-uniformly over 0.005–2, so that many sit near a bin edge. Binning by
// the SD of the draws the truth is ranked among selects draws-sets whose
// SD came out small into sharper bins; at S = MinWidthSamples that bias
// must stay below what the bins can resolve. 20,000 trials put ≈ 3,700–
// 6,300 values in each bin (binomial SE of the central-half fraction
// ≤ 0.008); each bin must match the exact fraction within 3.5 SEs and get
// no verdict. With fewer draws no bins are formed.
func TestWidthSelectionBias(t *testing.T) {
	const S, n = MinWidthSamples, 20000
	r := rand.New(rand.NewPCG(11, 3))
	u, sd := make([]float64, n), make([]float64, n)
	col := make([]float64, S)
	for i := range n {
		w := math.Exp(math.Log(0.005) + r.Float64()*math.Log(2/0.005))
		truth := w * r.NormFloat64()
		for k := range col {
			col[k] = w * r.NormFloat64()
		}
		u[i], sd[i] = PIT(truth, col), stat.StdDev(col, nil)
	}
	ws := testWidthCalibration(t, u, sd, S, 200)
	if len(ws) != 4 {
		t.Fatalf("%d bins, want 4", len(ws))
	}
	for _, w := range ws {
		if math.Abs(w.Central.Value-w.CentralExpected) > 3.5*w.Central.SE || w.Verdict != "" {
			t.Errorf("%s: central half %.4f ± %.4f against %.4f, verdict %q", w.Label(), w.Central.Value, w.Central.SE, w.CentralExpected, w.Verdict)
		}
	}
	if ws := testWidthCalibration(t, u, sd, S-1, 200); ws != nil {
		t.Errorf("S = %d: %d bins; want none", S-1, len(ws))
	}
}

// testWidthCalibration runs widthCalibration with bands of reps
// replicates at level 0.95 and bootstraps of reps/4 resamples, each seeded
// by its size or bin.
func testWidthCalibration(t *testing.T, u, sd []float64, S, reps int) []WidthCalibration {
	t.Helper()
	band := func(m int) (float64, error) {
		b, err := UniformCEBand(m, S, reps, 0.95, uint64(m))
		return b.Upper, err
	}
	boot := func(b, m int, stat func([]int) float64) float64 { return Bootstrap(m, reps/4, uint64(b), stat) }
	ws, err := widthCalibration(u, sd, S, band, boot)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}
