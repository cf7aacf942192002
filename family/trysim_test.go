package family_test

import (
	"math"
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/family/lingauss"
)

// flaky is lingauss-k6 as a BatchSimulator whose observation is NaN when
// the Const component is on with θ₀ > cut: a stand-in for an external
// simulator that fails on part of the prior.
type flaky struct {
	*lingauss.Family
	cut     float64
	redraws int
}

func (f flaky) SimulateSamples(samples []family.Sample, bad []bool) error {
	for i := range samples {
		s := &samples[i]
		f.Forward(s.Design, s.Theta, s.Mask, s.X)
		bad[i] = s.Mask[0] && s.Theta[0] > f.cut
		if bad[i] {
			s.X[0] = math.NaN()
		}
	}
	return nil
}

func (f flaky) MaxRedraws() int { return f.redraws }

// TestTrySimulateBatchRedraws: failed samples are redrawn from their own
// streams, so the result does not depend on how the stream is cut into
// batches; every returned sample passes; the dropped count is the number
// of failed draws; and a simulator that always fails ends in an error
// naming the samples after MaxRedraws redraws.
func TestTrySimulateBatchRedraws(t *testing.T) {
	f := flaky{Family: lingauss.New(), cut: 0, redraws: 50}
	opt := family.SimOptions{Seed: 5, Lambda: 0.7}
	whole := make([]family.Sample, 40)
	dropped, err := family.TrySimulateBatch(f, opt, 0, whole)
	if err != nil {
		t.Fatal(err)
	}
	// About λ/2 = 35 % of first draws fail (Const on, θ₀ > 0).
	if dropped < 5 || dropped > 40 {
		t.Errorf("dropped %d of 40", dropped)
	}
	parts := make([]family.Sample, 40)
	d1, err1 := family.TrySimulateBatch(f, opt, 0, parts[:13])
	d2, err2 := family.TrySimulateBatch(f, opt, 13, parts[13:])
	if err1 != nil || err2 != nil || d1+d2 != dropped {
		t.Fatalf("split batches: dropped %d+%d (whole %d), errors %v %v", d1, d2, dropped, err1, err2)
	}
	for i := range whole {
		a, b := &whole[i], &parts[i]
		if a.Index != uint64(i) || b.Index != a.Index || family.MaskString(a.Mask) != family.MaskString(b.Mask) || a.Theta[0] != b.Theta[0] || a.X[5] != b.X[5] || a.SimSeed != b.SimSeed {
			t.Fatalf("sample %d differs between batchings", i)
		}
		if a.Mask[0] && a.Theta[0] > 0 {
			t.Fatalf("sample %d kept a failing draw", i)
		}
	}
	never := flaky{Family: lingauss.New(), cut: math.Inf(-1), redraws: 3}
	_, err = family.TrySimulateBatch(never, family.SimOptions{Seed: 5, Lambda: 1}, 100, make([]family.Sample, 4))
	if err == nil || !strings.Contains(err.Error(), "after 3 redraw(s)") || !strings.Contains(err.Error(), "samples 100–103") || !strings.Contains(err.Error(), "Const.c1=") {
		t.Fatalf("always failing: %v", err)
	}
}
