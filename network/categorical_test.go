package network

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mathext"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
)

func categoricalConfig(f family.Family) Config {
	c := tinyConfig(f)
	c.MaskDecoder = CategoricalDecoder
	return c
}

// TestCategoricalSupport checks the enumerated classes against the
// families' model counts (lingauss-k6: 2⁶ base masks, its noise component
// always on; b3s: 15; bszt: 2048) and that a family with a larger support
// is refused with a message naming it.
func TestCategoricalSupport(t *testing.T) {
	for name, want := range map[string]int{"lingauss-k6": 64, "b3s": 15, "bszt": 2048} {
		n := newNet(t, name, categoricalConfig, 1)
		if got := len(n.SupportMasks()); got != want {
			t.Errorf("%s: %d classes, want %d", name, got, want)
		}
		prior := n.fam.MaskPrior()
		for j, m := range n.SupportMasks() {
			if n.classOf(m) != int32(j) || math.IsInf(prior.LogProb(m, 0.3), -1) {
				t.Fatalf("%s: class %d (%s) misindexed or outside the prior support", name, j, family.MaskString(m))
			}
		}
	}
	f := lookup(t, "symbolic-k15")
	if _, err := New(f, categoricalConfig(f), 1); err == nil || !strings.Contains(err.Error(), "symbolic-k15") {
		t.Errorf("symbolic-k15 (163,840 masks): err = %v, want a support-size error naming the family", err)
	}
	c := tinyConfig(f)
	c.MaskDecoder = "softmax"
	if err := c.Validate(); err == nil {
		t.Error("unknown mask_decoder accepted")
	}
}

// categoricalMaskLoss builds a perturbed categorical network on
// lingauss-k6 with the given number of λ nodes and returns it, a batch of 8
// simulations and the mask term of their training loss.
func categoricalMaskLoss(t *testing.T, nodes int) (*Net, []family.Sample, float64) {
	t.Helper()
	n := newNet(t, "lingauss-k6", func(f family.Family) Config {
		c := categoricalConfig(f)
		c.LambdaNodes = nodes
		return c
	}, 4)
	perturbParams(n, 0.3, 5)
	s := simulate(n.fam, 6, 0, 8)
	var b Batch
	if err := n.MakeBatch(s, 7, &b); err != nil {
		t.Fatal(err)
	}
	_, maskLoss, _ := n.Loss(engine.NewGraph(), &b)
	return n, s, maskLoss
}

// TestCategoricalStartsAtPrior: the head is zero-initialised, so before
// training q(M | x, λ) must equal the exact prior p(M | λ) for any x and λ
// (float32 logits: tolerance 1e-5 on log-probabilities of order 1–20).
func TestCategoricalStartsAtPrior(t *testing.T) {
	n := newNet(t, "lingauss-k6", categoricalConfig, 2)
	s := simulate(n.fam, 3, 0, 2)
	g := engine.NewInferenceGraph()
	enc := encodeSamples(t, n, g, s)
	masks := append(append([][]bool{}, n.SupportMasks()...), n.SupportMasks()...)
	prior := n.fam.MaskPrior()
	for _, lambda := range []float64{0.05, 0.5, 0.93} {
		lq, err := n.MaskLogProbs(g, enc, lambda, masks, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range masks {
			if want := prior.LogProb(m, lambda); math.Abs(lq[i]-want) > 1e-5*math.Max(1, math.Abs(want)) {
				t.Fatalf("λ %v, mask %s: log q %v, prior %v", lambda, family.MaskString(m), lq[i], want)
			}
		}
	}
	off := append([]bool(nil), masks[0]...)
	off[len(off)-1] = false // lingauss's noise component is always on
	lq, err := n.MaskLogProbs(g, enc, 0.5, [][]bool{masks[0], off}, nil)
	if err != nil || !math.IsInf(lq[1], -1) {
		t.Errorf("mask outside the support: log q %v (err %v), want −Inf", lq, err)
	}
	if _, err := n.MaskLogits(g, enc, 0.5, masks[:2]); err == nil {
		t.Error("MaskLogits of a categorical decoder: no error")
	}
}

// TestCategoricalLossIsNLL: with perturbed weights, the training loss's
// mask term must equal −(1/B) Σ log q(M_b | x_b, λ_b) recomputed one
// sample at a time with MaskLogProbs (float32 vs float64 sums over 8 terms
// of order 5: tolerance 1e-4 relative), and q must normalise over the
// support.
func TestCategoricalLossIsNLL(t *testing.T) {
	n, s, maskLoss := categoricalMaskLoss(t, 0)
	g := engine.NewInferenceGraph()
	want := 0.0
	for i := range s {
		g.Reset()
		enc := encodeSamples(t, n, g, s[i:i+1])
		all, err := n.MaskLogProbs(g, enc, s[i].Lambda, n.SupportMasks(), nil)
		if err != nil {
			t.Fatal(err)
		}
		total := 0.0
		for _, lq := range all {
			total += math.Exp(lq)
		}
		if math.Abs(total-1) > 1e-9 {
			t.Fatalf("sample %d: Σ q = %v", i, total)
		}
		want -= all[n.classOf(s[i].Mask)] / float64(len(s))
	}
	if math.Abs(maskLoss-want) > 1e-4*math.Abs(want) {
		t.Errorf("mask loss %v, −mean log q %v", maskLoss, want)
	}
}

// TestCategoricalSampleFrequencies: SampleMasks's draws must follow the
// log q it reports, which must equal MaskLogProbs (binomial standard
// error; 5 se + 1/draws, as for the autoregressive sampler).
func TestCategoricalSampleFrequencies(t *testing.T) {
	n := newNet(t, "lingauss-k6", categoricalConfig, 8)
	perturbParams(n, 0.5, 9)
	s := simulate(n.fam, 10, 0, 2)
	g := engine.NewInferenceGraph()
	enc := encodeSamples(t, n, g, s)
	const draws = 4000
	masks, logq, err := n.SampleMasks(enc, 0.4, draws, rand.New(rand.NewPCG(2, 3)))
	if err != nil {
		t.Fatal(err)
	}
	check, err := n.MaskLogProbs(g, enc, 0.4, masks, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range masks {
		if math.Abs(logq[i]-check[i]) > 1e-9 {
			t.Fatalf("draw %d: sampler log q %v, MaskLogProbs %v", i, logq[i], check[i])
		}
	}
	for o := range 2 {
		checkFrequencies(t, masks[o*draws:(o+1)*draws], logq[o*draws:(o+1)*draws])
	}
	again, _, _ := n.SampleMasks(enc, 0.4, draws, rand.New(rand.NewPCG(2, 3)))
	for i := range masks {
		if family.MaskString(masks[i]) != family.MaskString(again[i]) {
			t.Fatal("same seed, different masks")
		}
	}
}

// TestLambdaNodesPosterior: for lingauss's prior (Bernoulli(λ) on six
// base components, λ ~ U(0, 1)) the posterior of λ given a mask with n
// active components is Beta(n+1, 7−n). The node weights must reproduce its
// mean (n+1)/8 and second moment (n+1)(n+2)/72 to rounding: the integrands
// λ^{n+r}(1−λ)^{6−n} have degree ≤ 8 < 2J for J = 5 nodes.
func TestLambdaNodesPosterior(t *testing.T) {
	n := newNet(t, "lingauss-k6", func(f family.Family) Config {
		c := categoricalConfig(f)
		c.LambdaNodes = 5
		return c
	}, 1)
	for class, m := range n.SupportMasks() {
		a := float64(family.ActiveCount(m[:6]))
		sum, m1, m2 := nodeMoments(n, class)
		if want1, want2 := (a+1)/8, (a+1)*(a+2)/72; math.Abs(sum-1) > 1e-12 || math.Abs(m1-want1) > 1e-12 || math.Abs(m2-want2) > 1e-12 {
			t.Fatalf("mask %s: Σw %v, E[λ] %v (want %v), E[λ²] %v (want %v)", family.MaskString(m), sum, m1, want1, m2, want2)
		}
	}
}

// nodeMoments returns Σ_j w_j, Σ_j w_j λ_j and Σ_j w_j λ_j² of a class's
// node weights.
func nodeMoments(n *Net, class int) (sum, m1, m2 float64) {
	for j, w := range n.cat.nodeWeight[class] {
		l := n.cat.nodes[j]
		sum += w
		m1 += w * l
		m2 += w * l * l
	}
	return sum, m1, m2
}

// TestCategoricalLambdaNodesLoss: with J = 4 nodes the mask loss must be
// (1/B) Σ_b Σ_j w_j(M_b)·(−log q(M_b | x_b, λ_j)), recomputed with
// MaskLogProbs at the nodes (tolerance as in TestCategoricalLossIsNLL).
func TestCategoricalLambdaNodesLoss(t *testing.T) {
	n, s, maskLoss := categoricalMaskLoss(t, 4)
	g := engine.NewInferenceGraph()
	want := 0.0
	for i := range s {
		g.Reset()
		enc := encodeSamples(t, n, g, s[i:i+1])
		for j, l := range n.cat.nodes {
			lq, err := n.MaskLogProbs(g, enc, l, [][]bool{s[i].Mask}, nil)
			if err != nil {
				t.Fatal(err)
			}
			want -= n.cat.nodeWeight[n.classOf(s[i].Mask)][j] * lq[0] / float64(len(s))
		}
	}
	if math.Abs(maskLoss-want) > 1e-4*math.Abs(want) {
		t.Errorf("mask loss %v, node-weighted −mean log q %v", maskLoss, want)
	}
	c := n.cfg
	c.MaskDecoder = ""
	if err := c.Validate(); err == nil {
		t.Error("lambda_nodes with the autoregressive decoder accepted")
	}
}

// TestLambdaNodesPosteriorRho: with the training λ drawn from
// ρ = (1−m)·U(0, 1) + m·Beta(p, 1) (SetTrainingLambda), the posterior of λ
// for a lingauss mask with a active components is
// p(λ | M) ∝ ρ(λ)·λ^a (1−λ)^{6−a}, whose moments are ratios of Beta
// functions: E[λ^r | M] = [(1−m)B(a+r+1, 7−a) + m·p·B(a+r+p, 7−a)] /
// [(1−m)B(a+1, 7−a) + m·p·B(a+p, 7−a)]. With p = 3 the integrands have
// degree ≤ 10 < 2J for J = 6 nodes, so the node weights reproduce them to
// rounding. Resetting ρ to U(0, 1) restores the weights of
// TestLambdaNodesPosterior.
func TestLambdaNodesPosteriorRho(t *testing.T) {
	n := newNet(t, "lingauss-k6", func(f family.Family) Config {
		c := categoricalConfig(f)
		c.LambdaNodes = 6
		return c
	}, 1)
	uniform := make([][]float64, len(n.cat.nodeWeight))
	for c, w := range n.cat.nodeWeight {
		uniform[c] = append([]float64(nil), w...)
	}
	const m, p = 0.75, 3.0
	if err := n.SetTrainingLambda(family.LambdaDist{Mix: m, Power: p}); err != nil {
		t.Fatal(err)
	}
	beta := func(x, y float64) float64 { return math.Exp(mathext.Lbeta(x, y)) }
	moment := func(a, r float64) float64 {
		num := (1-m)*beta(a+r+1, 7-a) + m*p*beta(a+r+p, 7-a)
		den := (1-m)*beta(a+1, 7-a) + m*p*beta(a+p, 7-a)
		return num / den
	}
	for class, mk := range n.SupportMasks() {
		a := float64(family.ActiveCount(mk[:6]))
		sum, m1, m2 := nodeMoments(n, class)
		if want1, want2 := moment(a, 1), moment(a, 2); math.Abs(sum-1) > 1e-12 || math.Abs(m1-want1) > 1e-12 || math.Abs(m2-want2) > 1e-12 {
			t.Fatalf("mask %s: Σw %v, E[λ] %v (want %v), E[λ²] %v (want %v)", family.MaskString(mk), sum, m1, want1, m2, want2)
		}
	}
	if err := n.SetTrainingLambda(family.LambdaDist{}); err != nil {
		t.Fatal(err)
	}
	for c, w := range n.cat.nodeWeight {
		for j := range w {
			if w[j] != uniform[c][j] {
				t.Fatalf("class %d node %d: weight %v after resetting to U(0, 1), %v before", c, j, w[j], uniform[c][j])
			}
		}
	}
	if err := n.SetTrainingLambda(family.LambdaDist{Mix: 2, Power: 3}); err == nil {
		t.Error("SetTrainingLambda accepted mix 2")
	}
}
