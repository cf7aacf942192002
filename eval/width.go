package eval

import (
	"fmt"
	"math"
	"strings"
)

// WidthCalibration is the parameter-SBC result of the PIT values whose
// posterior draws have a standard deviation in [SDLo, SDHi), in latent
// units (the latent prior is N(0, 1), so an SD is a fraction of the
// prior's). Binning by width separates a miss that comes from sharp
// posteriors from one spread over all of them; Central says in which
// direction a bin misses.
type WidthCalibration struct {
	SDLo float64 `json:"sd_lo"`
	// SDHi is nil for the last bin, which has no upper edge.
	SDHi   *float64 `json:"sd_hi,omitempty"`
	Values int      `json:"values"`
	// CE has a bootstrap SE over the bin's values; BandUpper is the level
	// quantile of a perfect posterior's CE at Values independent PIT
	// values (UniformCEBand).
	CE        Value   `json:"ce"`
	BandUpper float64 `json:"band_upper"`
	Inside    bool    `json:"inside_band"`
	// Central is the fraction of the bin's PIT values in (1/4, 3/4), with
	// its binomial SE under calibration; CentralExpected is that fraction
	// for a perfect posterior with the same S (about 1/2). Above it the
	// posteriors are too wide (the truth falls too often in their middle
	// half), below it too narrow.
	Central         Value   `json:"central_half"`
	CentralExpected float64 `json:"central_half_expected"`
	// MeanPIT is the mean PIT value with its SE under calibration (a
	// perfect posterior's is 1/2 exactly): above 1/2 the truth sits high
	// in the posteriors, which lie too low; below, too high.
	MeanPIT Value `json:"mean_pit"`
	// Verdict names the departures larger than two SEs: "too wide" or
	// "too narrow" (Central), "too low" or "too high" (MeanPIT), comma
	// separated; "" when there are none.
	Verdict string `json:"verdict,omitempty"`
}

// meanPIT returns the mean of PIT values u among S samples and its SE for a
// perfectly calibrated posterior: the levels (r − 0.5)/(S+1), r = 1…S+1,
// are uniform with mean 1/2 and variance ((S+1)² − 1)/(12(S+1)²).
func meanPIT(u []float64, S int) Value {
	l := float64(S + 1)
	return Value{mean(u), math.Sqrt((l*l - 1) / (12 * l * l) / float64(len(u)))}
}

// inCentralHalf reports whether a PIT value lies in (1/4, 3/4), the middle
// half of the posterior that the width test counts.
func inCentralHalf(u float64) bool { return u > 0.25 && u < 0.75 }

// verdict names the departures of a set of PIT values from calibration
// that exceed two SEs (see WidthCalibration.Verdict).
func verdict(central Value, centralExpected float64, mean Value) string {
	var v []string
	switch {
	case central.Value > centralExpected+2*central.SE:
		v = append(v, "too wide")
	case central.Value < centralExpected-2*central.SE:
		v = append(v, "too narrow")
	}
	switch {
	case mean.Value > 0.5+2*mean.SE:
		v = append(v, "too low")
	case mean.Value < 0.5-2*mean.SE:
		v = append(v, "too high")
	}
	return strings.Join(v, ", ")
}

// MinWidthSamples is the fewest posterior draws per PIT value with which
// widthCalibration bins by width. The bin is chosen by the SD of the same
// draws the truth is ranked among, so a draws-set whose SD came out small by
// chance lands in a sharper bin and holds the truth in its middle half less
// often: a selection bias. For exact posteriors whose SDs spread evenly
// (in log) across the edges, it moves a bin's central-half fraction by
// 0.09 at S = 2, 0.012 at S = 10 and ≤ 0.005 from S = 20 on (simulated,
// TestWidthSelectionBias), below the binomial SE of any bin of a few
// thousand values.
const MinWidthSamples = 20

// widthEdges are the bin edges of posterior SD (latent units, a fraction
// of the prior SD) for WidthCalibration: each bin three times wider than
// the one before.
var widthEdges = []float64{0, 0.03, 0.1, 0.3, math.Inf(1)}

// centralExpected returns the fraction of the S + 1 discrete PIT levels
// (r − 0.5)/(S+1) that lie in (1/4, 3/4): the expected central-half
// fraction of a perfectly calibrated posterior with S samples.
func centralExpected(S int) float64 {
	in := 0
	for r := 1; r <= S+1; r++ {
		if inCentralHalf(pitLevel(r, S+1)) {
			in++
		}
	}
	return float64(in) / float64(S+1)
}

// widthCalibration bins PIT values u (among S samples each) by the SD sd
// of the posterior draws they were ranked in and calibrates every
// non-empty bin. band returns the CE band's upper quantile at n values,
// boot the bootstrap SE of a statistic over n values for bin b. With
// fewer than MinWidthSamples draws it returns no bins.
func widthCalibration(u, sd []float64, S int, band func(n int) (float64, error), boot func(b, n int, stat func(idx []int) float64) float64) ([]WidthCalibration, error) {
	if len(u) != len(sd) {
		return nil, fmt.Errorf("eval: %d PIT values but %d posterior SDs", len(u), len(sd))
	}
	if S < MinWidthSamples {
		return nil, nil
	}
	exp := centralExpected(S)
	var out []WidthCalibration
	for b := 0; b+1 < len(widthEdges); b++ {
		lo, hi := widthEdges[b], widthEdges[b+1]
		var v []float64
		for i, s := range sd {
			if s >= lo && s < hi {
				v = append(v, u[i])
			}
		}
		if len(v) == 0 {
			continue
		}
		up, err := band(len(v))
		if err != nil {
			return nil, err
		}
		ce := CalibrationError(v)
		se := boot(b, len(v), func(idx []int) float64 { return CalibrationError(pick(v, idx)) })
		in := 0
		for _, x := range v {
			if inCentralHalf(x) {
				in++
			}
		}
		c := float64(in) / float64(len(v))
		cse := math.Sqrt(exp * (1 - exp) / float64(len(v)))
		w := WidthCalibration{SDLo: lo, Values: len(v), CE: Value{ce, se}, BandUpper: up, Inside: ce <= up,
			Central: Value{c, cse}, CentralExpected: exp, MeanPIT: meanPIT(v, S)}
		if !math.IsInf(hi, 1) {
			w.SDHi = &hi
		}
		w.Verdict = verdict(w.Central, exp, w.MeanPIT)
		out = append(out, w)
	}
	return out, nil
}

// Label names the bin's SD range, e.g. "sd 0.03–0.1" or "sd ≥ 0.3".
func (w WidthCalibration) Label() string {
	switch {
	case w.SDHi == nil:
		return fmt.Sprintf("sd ≥ %g", w.SDLo)
	case w.SDLo == 0:
		return fmt.Sprintf("sd < %g", *w.SDHi)
	}
	return fmt.Sprintf("sd %g–%g", w.SDLo, *w.SDHi)
}

// WidthSummary says in one line, per bin of posterior SD, the CE against
// its band, the central-half fraction against a perfect posterior's, the
// mean PIT and the verdict.
func WidthSummary(ws []WidthCalibration) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		in := "inside"
		if !w.Inside {
			in = "OUTSIDE"
		}
		v := ""
		if w.Verdict != "" {
			v = ", " + w.Verdict
		}
		parts[i] = fmt.Sprintf("%s: %d values, CE %.4f (band ≤ %.4f, %s), central half %.3f ± %.3f (%.3f expected), mean PIT %.3f ± %.3f%s",
			w.Label(), w.Values, w.CE.Value, w.BandUpper, in, w.Central.Value, w.Central.SE, w.CentralExpected, w.MeanPIT.Value, w.MeanPIT.SE, v)
	}
	return strings.Join(parts, "; ")
}
