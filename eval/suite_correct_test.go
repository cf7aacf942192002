package eval

import (
	"math"
	"testing"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/posterior"
)

// TestCorrectedParamSBC checks the corrected parameter SBC end to end on
// the committed lingauss-k6 network, sampled with a single ODE step so
// that q(θ | M, x) is far from the posterior: the network's own parameter
// SBC must then be outside its perfect-posterior band, and the SBC of the
// same draws corrected by SMC (under each observation's true model, whose
// exact posterior is Gaussian) inside it. At this seed the network's CE is
// 0.058 against a band of 0.024 and the corrected CE 0.008; the band is the
// test's own tolerance (a perfect posterior stays below it with
// probability 0.95, and the seed is fixed). A correction that ranked the
// truth among another observation's draws, or a wrong coordinate, would
// put the CE far outside. The same seed must give the same result.
func TestCorrectedParamSBC(t *testing.T) {
	p, err := posterior.Load("../posterior/testdata/lingauss-k6-ema.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{N: 200, Seed: 3, Lambda: 0.5, ThetaSamples: 50, Steps: 1, KSDObs: -1, ISObs: -1, PredObs: -1,
		Correct: correct.DefaultSettings(correct.SMC), CorrectObs: 200}
	rep, err := Run(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.ParamCorrected
	if c == nil {
		t.Fatal("no corrected parameter SBC in the report")
	}
	t.Logf("network CE %.4f (band ≤ %.4f); smc-corrected CE %.4f ± %.4f (band ≤ %.4f, dependent ≤ %.4f), %d failed, mean ESS %.3f",
		rep.Param.CE.Value, rep.Param.Band.Upper, c.CE.Value, c.CE.SE, c.Band.Upper, c.DependentBand.Upper, c.Failed, c.ESS.Value)
	if rep.Param.Inside {
		t.Errorf("network with one ODE step: CE %.4f inside its band %.4f; the test needs a miscalibrated q", rep.Param.CE.Value, rep.Param.Band.Upper)
	}
	if !c.Inside || !*c.InsideDependent {
		t.Errorf("smc-corrected CE %.4f outside its band %.4f or dependent band %.4f", c.CE.Value, c.Band.Upper, c.DependentBand.Upper)
	}
	if c.Method != "smc" || c.Observations != 200 || c.Values != rep.Param.Values || len(c.ByDimension) == 0 {
		t.Errorf("report: method %q, %d observations, %d values (network %d), %d dimensions", c.Method, c.Observations, c.Values, rep.Param.Values, len(c.ByDimension))
	}
	// A failed correction is one whose diagnostics are poor; from a q this
	// far off a few may be (1 of 200 here), not many.
	if c.Failed > 5 || !(c.ESS.Value > 0.5) {
		t.Errorf("%d of 200 corrections failed, mean ESS %.3f", c.Failed, c.ESS.Value)
	}
	// The passed corrections alone: as many PIT values as their trials
	// hold, and calibrated too.
	switch {
	case c.Passed == nil:
		t.Error("no SBC of the passed corrections")
	case c.Failed > 0 && c.Passed.Values >= c.Values, c.Failed == 0 && c.Passed.Values != c.Values:
		t.Errorf("passed corrections hold %d of %d values with %d failed", c.Passed.Values, c.Values, c.Failed)
	case !c.Passed.Inside:
		t.Errorf("passed corrections: CE %.4f outside its band %.4f", c.Passed.CE.Value, c.Passed.Band.Upper)
	}

	// Same seed, same result; no correction, no corrected SBC.
	small := cfg
	small.N, small.CorrectObs = 30, 20
	a, err := Run(p, small)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(p, small)
	if err != nil {
		t.Fatal(err)
	}
	if a.ParamCorrected.Observations != 20 || a.ParamCorrected.CE != b.ParamCorrected.CE || math.IsNaN(a.ParamCorrected.CE.Value) {
		t.Errorf("same seed: corrected CE %+v and %+v over %d observations", a.ParamCorrected.CE, b.ParamCorrected.CE, a.ParamCorrected.Observations)
	}
	small.Correct = correct.Settings{}
	r, err := Run(p, small)
	if err != nil {
		t.Fatal(err)
	}
	if r.ParamCorrected != nil {
		t.Errorf("without a correction: corrected SBC %+v", r.ParamCorrected)
	}
}
