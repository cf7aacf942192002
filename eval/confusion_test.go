package eval

import (
	"math"
	"testing"

	"github.com/prismsbi/prism/family"
	fdmri "github.com/prismsbi/prism/family/dmri"
	"github.com/prismsbi/prism/network"
	"github.com/prismsbi/prism/posterior"
)

// TestBinaryScores checks a hand-counted case: TP 2, FN 1, FP 1, TN 1.
func TestBinaryScores(t *testing.T) {
	truth := []bool{true, true, false, false, true}
	prob := []float64{0.9, 0.4, 0.6, 0.1, 0.7}
	cm, err := BinaryConfusion(truth, prob, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if cm != [2][2]float64{{1, 1}, {1, 2}} {
		t.Fatalf("confusion %v, want [[1 1] [1 2]]", cm)
	}
	a, p, r, f := BinaryScores(cm)
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"accuracy", a, 0.6}, {"precision", p, 2.0 / 3}, {"recall", r, 2.0 / 3}, {"F1", f, 2.0 / 3}} {
		if math.Abs(c.got-c.want) > 1e-15 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if _, err := BinaryConfusion(truth, prob[:2], 0.5); err == nil {
		t.Error("mismatched lengths accepted")
	}
	// No positive prediction and no positive label: all scores defined as 0
	// except accuracy.
	a, p, r, f = BinaryScores([2][2]float64{{3, 0}, {0, 0}})
	if a != 1 || p != 0 || r != 0 || f != 0 {
		t.Errorf("all-negative case: %v %v %v %v, want 1 0 0 0", a, p, r, f)
	}
}

// toySpace is a family-like setting: Ball {0}, two exchangeable sticks
// {1, 2} and one noise {3}; the space is every mask with the noise on.
func toySpace() ([]family.Class, []string, [][]bool) {
	classes := []family.Class{{Name: "Ball", Components: []int{0}}, {Name: "Stick", Components: []int{1, 2}}, {Name: "Noise", Components: []int{3}, Noise: true}}
	names := []string{"Ball", "Stick1", "Stick2", "Noise"}
	var space [][]bool
	for b := range 8 {
		space = append(space, []bool{b&1 != 0, b&2 != 0, b&4 != 0, true})
	}
	return classes, names, space
}

func oneHot(space [][]bool, m []bool) []float64 {
	p := make([]float64, len(space))
	for i, s := range space {
		if family.MaskString(s) == family.MaskString(m) {
			p[i] = 1
		}
	}
	return p
}

// TestSelectionMetricsKnownAnswers: a posterior with all mass on the true
// mask scores 1 everywhere; a posterior that splits the mass equally
// between the two exchangeable sticks (label switching) gets every stick
// wrong (P = 0.5 is not > 0.5) but the Stick class and the model class
// (signature) right.
func TestSelectionMetricsKnownAnswers(t *testing.T) {
	classes, names, space := toySpace()
	var truth [][]bool
	var perfect, switched [][]float64
	for _, m := range space {
		truth = append(truth, m)
		perfect = append(perfect, oneHot(space, m))
		// Switched: the mask with the two sticks swapped gets half.
		sw := []bool{m[0], m[2], m[1], m[3]}
		p := oneHot(space, m)
		q := oneHot(space, sw)
		for i := range p {
			p[i] = (p[i] + q[i]) / 2
		}
		switched = append(switched, p)
	}
	res, err := SelectionMetrics(classes, names, space, truth, perfect, 20, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Signatures != 6 { // none, Ball, Stick, 2Stick, Ball+Stick, Ball+2Stick
		t.Fatalf("%d signatures %v, want 6", res.Signatures, res.Labels)
	}
	if res.Top1.Value != 1 || res.F1.Value != 1 || res.Present != 6 {
		t.Errorf("perfect posterior: signature top-1 %v, F1 %v over %d classes; want 1, 1, 6", res.Top1.Value, res.F1.Value, res.Present)
	}
	for _, p := range append(res.Components, res.Classes...) {
		if p.Accuracy.Value != 1 {
			t.Errorf("perfect posterior: %s accuracy %v", p.Name, p.Accuracy.Value)
		}
	}
	res, err = SelectionMetrics(classes, names, space, truth, switched, 20, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Top1.Value != 1 {
		t.Errorf("label switching: signature top-1 %v, want 1", res.Top1.Value)
	}
	byName := map[string]Presence{}
	for _, p := range res.Components {
		byName["c:"+p.Name] = p
	}
	for _, p := range res.Classes {
		byName["k:"+p.Name] = p
	}
	// Stick1 is active in 4 of 8 masks; with one stick on, P(Stick1) = 0.5
	// (predicted absent): the masks with exactly one stick (2 of them with
	// Stick1) are missed, those with both (2) found: recall 2/4.
	if s1 := byName["c:Stick1"]; s1.Support != 4 || s1.Recall.Value != 0.5 || s1.Precision.Value != 1 {
		t.Errorf("Stick1: support %d, recall %v, precision %v; want 4, 0.5, 1", s1.Support, s1.Recall.Value, s1.Precision.Value)
	}
	if st := byName["k:Stick"]; st.Accuracy.Value != 1 || st.Support != 6 {
		t.Errorf("Stick class: accuracy %v, support %d; want 1, 6", st.Accuracy.Value, st.Support)
	}
	if b := byName["c:Ball"]; b.Accuracy.Value != 1 {
		t.Errorf("Ball accuracy %v, want 1", b.Accuracy.Value)
	}
	// A truth whose signature is not in the space is an error.
	if _, err := SelectionMetrics(classes, names, space[:1], truth[1:2], [][]float64{{1}}, 20, 1); err == nil {
		t.Error("a true signature outside the space was accepted")
	}
}

// TestSelectionOnBSZT runs the suite's model-selection view with an
// untrained bszt network on simulated test data: 128 signatures (ball 0–1
// × sticks, zeppelins, tensors 0–3 each), confusion rows adding up to the
// observations, supports equal to the true masks' counts, and the paper's
// table attached.
func TestSelectionOnBSZT(t *testing.T) {
	f := fdmri.BSZT()
	ncfg := network.DefaultConfig(f)
	ncfg.ModelDim, ncfg.Heads, ncfg.HeadDim, ncfg.EncoderLayers, ncfg.MaskLayers, ncfg.ParamLayers = 16, 2, 8, 1, 1, 1
	ncfg.MaskDecoder = "categorical"
	net, err := network.New(f, ncfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	p := posterior.New(net)
	cfg := Config{N: 40, Seed: 2, Lambda: math.NaN(), BootReps: 10}
	if err := cfg.defaults(f); err != nil {
		t.Fatal(err)
	}
	r := &run{p: p, f: f, cfg: cfg}
	if err := r.simulate(); err != nil {
		t.Fatal(err)
	}
	res, err := r.selection()
	if err != nil {
		t.Fatal(err)
	}
	if res == nil || res.Signatures != 128 || res.Models != 2048 || res.Paper == nil || res.Paper.Top5 != 0.940 {
		t.Fatalf("selection %+v", res)
	}
	var total float64
	for _, row := range res.Matrix {
		for _, v := range row {
			total += v
		}
	}
	if total != 40 {
		t.Errorf("confusion matrix holds %v observations, want 40", total)
	}
	for k, c := range res.Components {
		n := 0
		for _, s := range r.sims {
			if s.Mask[k] {
				n++
			}
		}
		if c.Support != n {
			t.Errorf("%s: support %d, true masks %d", c.Name, c.Support, n)
		}
	}
	if !(res.PriorTop1.Value >= 0 && res.PriorTop1.Value <= 1) {
		t.Errorf("prior top-1 %v", res.PriorTop1.Value)
	}
}
