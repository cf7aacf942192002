package view

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/network"
	"github.com/prismsbi/prism/posterior"
	"github.com/prismsbi/prism/train"
)

// lingauss returns a posterior on an untrained network of the
// configs/lingauss-k6.yaml architecture whose parameters are perturbed
// by N(0, 0.3²) noise (so that q(M | x, λ) is far from uniform), and an
// observation simulated from the prior at λ = 0.5.
func lingauss(t testing.TB) (*posterior.Posterior, posterior.Observation, []bool) {
	t.Helper()
	cfg, err := train.LoadConfig("../configs/lingauss-k6.yaml", "lingauss-k6")
	if err != nil {
		t.Fatal(err)
	}
	f, err := family.Lookup("lingauss-k6")
	if err != nil {
		t.Fatal(err)
	}
	net, err := network.New(f, cfg.Network, 3)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 99))
	for _, p := range net.Params().All() {
		for i := range p.Data {
			p.Data[i] += float32(0.3 * r.NormFloat64())
		}
	}
	obs, truth, err := SimulatedExample(f, 7, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	return posterior.New(net), obs, truth
}

// smallSettings keeps the grid tests fast.
func smallSettings() GridSettings {
	s := DefaultGridSettings()
	s.PredictSamples, s.Steps, s.MarginalSamples, s.MarginalSteps = 40, 4, 200, 4
	s.DiscoverLambdas, s.DiscoverMasks = []float64{0.2, 0.8}, 128
	return s
}

// allMasks lists the masks of f with positive prior probability.
func allMasks(f family.Family) [][]bool {
	c := len(f.Components())
	var out [][]bool
	for bits := range 1 << c {
		m := make([]bool, c)
		for k := range m {
			m[k] = bits&(1<<k) != 0
		}
		if !math.IsInf(f.MaskPrior().LogProb(m, 0.5), -1) {
			out = append(out, m)
		}
	}
	return out
}

// TestGridUpdate checks one λ update against independent computations:
// the ranking is posterior.TopK's over the candidates (the numbers of
// `prism select --candidates`); the inclusion probabilities, estimated
// from draws, agree with the exact Σ_M q(M | x, λ) M_k over the whole
// (enumerated) model space renormalised over the prior's support; the
// band is ordered and covers its mean.
func TestGridUpdate(t *testing.T) {
	p, obs, truth := lingauss(t)
	f := p.Family()
	all := allMasks(f)
	set := smallSettings()
	set.InclusionDraws = 4096 // a tolerance of about 0.025
	g, err := NewGrid(p, obs, truth, all, "sim", set)
	if err != nil {
		t.Fatal(err)
	}
	const lambda = 0.35
	u, err := g.Update(lambda, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := p.TopK([]posterior.Observation{obs}, lambda, all, g.set.Top, posterior.Options{Seed: g.set.Seed})
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Top) != g.set.Top {
		t.Fatalf("%d models listed, want %d", len(u.Top), g.set.Top)
	}
	for i, r := range want[0] {
		if u.Top[i].Mask != family.MaskString(r.Mask) || u.Top[i].LogQ != r.LogQ || u.Top[i].Q != math.Exp(r.LogQ) || u.Top[i].LogPrior != r.LogPrior {
			t.Errorf("rank %d: %+v, TopK %s %v", i, u.Top[i], family.MaskString(r.Mask), r.LogQ)
		}
	}
	lq, err := p.LogProbMasks([]posterior.Observation{obs}, lambda, [][][]bool{all}, posterior.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mass float64
	exact := make([]float64, len(f.Components()))
	for j, m := range all {
		q := math.Exp(lq[0][j])
		mass += q
		for k, on := range m {
			if on {
				exact[k] += q
			}
		}
	}
	// The candidates are the whole support: Mass is q's mass on it.
	if math.Abs(u.Mass-mass) > 1e-12 {
		t.Errorf("mass %v, exact %v", u.Mass, mass)
	}
	n := float64(u.Draws)
	for k, inc := range u.Inclusion {
		e := exact[k] / mass
		// A binomial proportion of n independent draws: 4.5 standard
		// errors (plus 1/n for a proportion at 0 or 1) make a false
		// alarm over the 6 components rarer than 1e−4.
		tol := 4.5*math.Sqrt(e*(1-e)/n) + 1/n
		if math.Abs(inc.Prob-e) > tol {
			t.Errorf("component %d %s: inclusion %.4f from %d draws, exact %.4f (tolerance %.4f)", k, inc.Name, inc.Prob, u.Draws, e, tol)
		}
	}
	b := u.Band
	if b.Kind != "global" || len(b.Mean) != obs.Design.N || len(b.X) != obs.Design.N {
		t.Fatalf("band %s of %d points", b.Kind, len(b.Mean))
	}
	for j := range b.Mean {
		if !(b.Lo[j] <= b.Mean[j] && b.Mean[j] <= b.Hi[j]) || b.X[j] != obs.Design.Cov[j] || b.Y[j] != obs.X[j] {
			t.Fatalf("point %d: lo %v mean %v hi %v", j, b.Lo[j], b.Mean[j], b.Hi[j])
		}
	}
	// The local band is `prism predict --local`'s: posterior.Predict
	// under the fixed model with the same options.
	local := all[len(all)-1]
	ul, err := g.Update(lambda, local)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := p.Predict([]posterior.Observation{obs}, posterior.PredictOptions{SampleOptions: posterior.SampleOptions{Options: posterior.Options{Seed: g.set.Seed}, Steps: g.set.Steps},
		Mask: local, Samples: g.set.PredictSamples})
	if err != nil {
		t.Fatal(err)
	}
	if ul.Band.Kind != "local" || ul.Band.Mask != family.MaskString(local) {
		t.Errorf("local band %s %s", ul.Band.Kind, ul.Band.Mask)
	}
	for j := range pb[0].Mean {
		if ul.Band.Mean[j] != pb[0].Mean[j] || ul.Band.Lo[j] != pb[0].Lo[j] || ul.Band.Hi[j] != pb[0].Hi[j] {
			t.Fatalf("local band point %d differs from posterior.Predict", j)
		}
	}
	// A candidate outside the prior's support (zero prior) is refused with
	// an error naming it, as by prism select.
	bad := make([]bool, len(f.Components()))
	if !math.IsInf(f.MaskPrior().LogProb(bad, lambda), -1) {
		t.Fatal("the empty mask is in lingauss-k6's support")
	}
	if _, err := NewGrid(p, obs, truth, [][]bool{all[0], bad}, "sim", smallSettings()); err == nil ||
		!strings.Contains(err.Error(), "candidate 2") || !strings.Contains(err.Error(), family.MaskString(bad)) {
		t.Errorf("a candidate outside the support: err = %v, want one naming candidate 2 and its mask", err)
	}
	if _, err := g.Update(1.5, nil); err == nil {
		t.Error("λ = 1.5 accepted")
	}
	if _, err := g.Update(0.5, []bool{true}); err == nil {
		t.Error("a 1-entry local mask accepted")
	}
}

// TestGridDiscover: without a candidate list the candidates are distinct
// supported masks, at most DiscoverTop per discovery λ.
func TestGridDiscover(t *testing.T) {
	p, obs, _ := lingauss(t)
	set := smallSettings()
	set.DiscoverTop = 5
	g, err := NewGrid(p, obs, nil, nil, "sim", set)
	if err != nil {
		t.Fatal(err)
	}
	c := g.Candidates()
	if len(c) == 0 || len(c) > set.DiscoverTop*len(set.DiscoverLambdas) {
		t.Fatalf("%d candidates", len(c))
	}
	seen := map[string]bool{}
	for _, s := range c {
		m, err := family.ParseMask(s, len(p.Family().Components()))
		if err != nil || seen[s] || math.IsInf(p.Family().MaskPrior().LogProb(m, 0.5), -1) {
			t.Errorf("candidate %s: %v, repeated %v", s, err, seen[s])
		}
		seen[s] = true
	}
}

// TestMarginals: one histogram per natural parameter of the model's
// active components, counting every draw.
func TestMarginals(t *testing.T) {
	p, obs, truth := lingauss(t)
	g, err := NewGrid(p, obs, truth, [][]bool{truth}, "sim", smallSettings())
	if err != nil {
		t.Fatal(err)
	}
	ms, err := g.Marginals(truth)
	if err != nil {
		t.Fatal(err)
	}
	var want int
	for k, c := range p.Family().Components() {
		if truth[k] {
			want += len(c.Params)
		}
	}
	if len(ms) != want {
		t.Fatalf("%d marginals, want %d (the active components' parameters)", len(ms), want)
	}
	for _, m := range ms {
		total := 0
		for _, c := range m.Counts {
			total += c
		}
		if total != g.set.MarginalSamples || len(m.Edges) != g.set.Bins+1 || !(m.Mean >= m.Edges[0] && m.Mean <= m.Edges[len(m.Edges)-1]) {
			t.Errorf("%s: %d draws, %d edges, mean %v in [%v, %v]", m.Name, total, len(m.Edges), m.Mean, m.Edges[0], m.Edges[len(m.Edges)-1])
		}
	}
	if _, err := g.Marginals(make([]bool, 2)); err == nil || !strings.Contains(err.Error(), "entries") {
		t.Errorf("short mask: %v", err)
	}
}

func TestHistogram(t *testing.T) {
	m := histogram("x", []float64{0, 1, 1, 2, 3, 4}, 4)
	if want := []int{1, 2, 1, 2}; len(m.Counts) != 4 || m.Counts[0] != want[0] || m.Counts[1] != want[1] || m.Counts[2] != want[2] || m.Counts[3] != want[3] {
		t.Errorf("counts %v, want %v", m.Counts, want)
	}
	if m.Edges[0] != 0 || m.Edges[4] != 4 || m.Mean != 11.0/6 {
		t.Errorf("edges %v mean %v", m.Edges, m.Mean)
	}
	// A constant sample still has a non-empty bin range.
	c := histogram("c", []float64{2, 2, 2}, 3)
	if c.Counts[0] != 3 || !(c.Edges[3] > c.Edges[0]) {
		t.Errorf("constant sample: %+v", c)
	}
}
