package network

import (
	"math"
	"testing"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/family/spec"
)

// TestPointTokens checks the point-observation features on a hand-made
// observation against their definitions (float32 rounding: 1e−6).
func TestPointTokens(t *testing.T) {
	y := []float64{3, -1, 10, 2}
	at := []float64{0, 6, 12, 24}
	d := family.Design{N: 4, CovDim: 1, Cov: at}
	ct := make([]float32, 4)
	feat := make([]float32, 4*pointsFeatures)
	pointTokens(d, y, 0, 24, ct, feat)
	mean := 14.0 / 4
	ss := 0.0
	for _, v := range y {
		ss += (v - mean) * (v - mean)
	}
	sd := math.Sqrt(ss / 4)
	for j := range y {
		c := 2*at[j]/24 - 1
		want := []float64{c, (y[j] - mean) / sd, math.Asinh(y[j]), math.Asinh(mean), math.Log(sd)}
		if math.Abs(float64(ct[j])-c) > 1e-6 {
			t.Errorf("c̃[%d] = %v, want %v", j, ct[j], c)
		}
		for k, w := range want {
			if got := float64(feat[j*pointsFeatures+k]); math.Abs(got-w) > 1e-6*max(1, math.Abs(w)) {
				t.Errorf("measurement %d feature %d = %v, want %v", j, k, got, w)
			}
		}
	}
}

// TestPointsEncoderIsASet: for a family with per-observation designs the
// encoder has no positions, so the pooled encoding of an observation does
// not depend on the order of its measurements, and observations of
// another length than training's are read.
func TestPointsEncoderIsASet(t *testing.T) {
	f, err := spec.Parse([]byte(`name: points-net-test
components:
  - {name: Level, params: [{name: a, prior: "uniform(0, 1)"}], term: a}
  - {name: Slope, params: [{name: b, prior: "uniform(-1, 1)"}], term: b*t}
  - {name: Gaussian, role: noise, noise: "0.1"}
observation:
  n: 6
  covariate: {name: t, prior: "uniform(0, 10)"}
simulator: {builtin: additive}
`), ".")
	if err != nil {
		t.Fatal(err)
	}
	if k := family.ObservationKindOf(f); k != family.ObservationPoints {
		t.Fatalf("kind %q, want %q", k, family.ObservationPoints)
	}
	n, err := New(f, tinyConfig(f), 3)
	if err != nil {
		t.Fatal(err)
	}
	mean := func(at, x []float64) []float32 {
		g := engine.NewInferenceGraph()
		enc, err := n.Encode(g, []Observation{{Design: family.Design{N: len(at), CovDim: 1, Cov: at}, X: x}})
		if err != nil {
			t.Fatal(err)
		}
		d := n.cfg.ModelDim
		m := make([]float32, d)
		for j := range len(at) {
			for k := range d {
				m[k] += enc.Data[j*d+k] / float32(len(at))
			}
		}
		return m
	}
	a := mean([]float64{1, 2, 5, 9}, []float64{0.3, 0.1, 0.9, 1.4})
	b := mean([]float64{9, 1, 5, 2}, []float64{1.4, 0.3, 0.9, 0.1})
	for k := range a {
		// Attention sums in another order: float32 rounding only.
		if math.Abs(float64(a[k]-b[k])) > 1e-5 {
			t.Fatalf("feature %d: %v in one order, %v in another", k, a[k], b[k])
		}
	}
}
