package network

import (
	"math"
	"testing"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
)

// TestWeightedLoss checks the importance-weighted training loss of samples
// from a proposal (family.Sample.LogWeight): for a batch of B samples with
// weights w_i, each of the two terms equals (1/B)·Σ w_i·ℓ_i, where ℓ_i is
// that term for sample i alone (a one-sample batch, which carries the same
// training noise because MakeBatch draws it from the sample's index).
// Tolerance 1e-5 relative: float32 sums of a few hundred terms.
func TestWeightedLoss(t *testing.T) {
	f := lookup(t, "b3s")
	n, err := New(f, tinyConfig(f), 50)
	if err != nil {
		t.Fatal(err)
	}
	perturbParams(n, 0.3, 51)
	s := simulate(f, 52, 0, 5)
	logw := []float64{math.Log(0.3), 0, math.Log(1.7), math.Log(0.05), math.Log(1.2)}
	const seed = 53
	one := func(i int) (float64, float64) {
		var b Batch
		single := []family.Sample{s[i]}
		single[0].LogWeight = 0
		if err := n.MakeBatch(single, seed, &b); err != nil {
			t.Fatal(err)
		}
		_, m, p := n.Loss(engine.NewGraph(), &b)
		return m, p
	}
	var wantM, wantP float64
	for i := range s {
		m, p := one(i)
		wantM += math.Exp(logw[i]) * m / float64(len(s))
		wantP += math.Exp(logw[i]) * p / float64(len(s))
		s[i].LogWeight = logw[i]
	}
	var b Batch
	if err := n.MakeBatch(s, seed, &b); err != nil {
		t.Fatal(err)
	}
	if !b.Weighted {
		t.Fatal("batch with log weights not marked weighted")
	}
	_, gotM, gotP := n.Loss(engine.NewGraph(), &b)
	if math.Abs(gotM-wantM) > 1e-5*wantM || math.Abs(gotP-wantP) > 1e-5*wantP {
		t.Errorf("weighted losses (mask %.7g, θ %.7g), want (%.7g, %.7g)", gotM, gotP, wantM, wantP)
	}
	// Reusing the batch for unweighted samples drops the weights.
	for i := range s {
		s[i].LogWeight = 0
	}
	if err := n.MakeBatch(s, seed, &b); err != nil {
		t.Fatal(err)
	}
	if b.Weighted {
		t.Error("unweighted batch marked weighted")
	}
	for _, a := range b.Active {
		if a != 0 && a != 1 {
			t.Fatalf("unweighted batch has θ-loss weight %v", a)
		}
	}
}
