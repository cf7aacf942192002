package eval

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
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
// "too narrow".
func TestWidthCalibration(t *testing.T) {
	const S, n = 50, 600
	run := func(scale float64) []WidthCalibration {
		r := rand.New(rand.NewPCG(7, 7))
		var u, sd []float64
		col := make([]float64, S)
		for _, g := range []struct{ w, k float64 }{{0.01, scale}, {0.5, 1}} {
			for range n {
				truth := g.w * r.NormFloat64() // posterior N(0, w²), truth drawn from it
				for i := range col {
					col[i] = g.k * g.w * r.NormFloat64()
				}
				u = append(u, PIT(truth, col))
				sd = append(sd, sampleSD(col))
			}
		}
		band := func(m int) (float64, error) {
			b, err := UniformCEBand(m, S, 400, 0.95, uint64(m))
			return b.Upper, err
		}
		boot := func(b, m int, stat func([]int) float64) float64 { return Bootstrap(m, 100, uint64(b), stat) }
		ws, err := widthCalibration(u, sd, S, band, boot)
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	ws := run(1.5)
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
	if w := run(0.6)[0]; w.Verdict != "too narrow" || w.Inside {
		t.Errorf("over-narrow sharp posteriors: %+v", w)
	}
	if _, err := widthCalibration([]float64{0.5}, nil, S, nil, nil); err == nil {
		t.Error("mismatched lengths accepted")
	}
}
