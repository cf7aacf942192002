package network

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
)

// TestKVCacheSamplingMatchesTeacherForcing decodes masks with the KV-cached
// sampler, recording every step's logits, and re-scores the sampled masks
// in one teacher-forced pass: logits and log q must agree. Both compute the
// same float32 arithmetic in different groupings (one query at a time
// against the cache versus all queries), so they agree to float32
// rounding of O(1) logits: 1e-4 absolute.
func TestKVCacheSamplingMatchesTeacherForcing(t *testing.T) {
	// Three observations with five rows each decode row by row; one
	// observation with 200 rows decodes shared prefixes once (groups split
	// as the rows' bits diverge), which must not change any row's logits.
	for _, c := range []struct{ obs, per int }{{3, 5}, {1, 200}} {
		for _, name := range []string{"lingauss-k6", "b3s", "symbolic-k15"} {
			checkCachedSampler(t, name, c.obs, c.per)
		}
	}
}

func checkCachedSampler(t *testing.T, name string, obs, per int) {
	t.Helper()
	n := newNet(t, name, tinyConfig, 12)
	perturbParams(n, 0.3, 13)
	s := simulate(n.fam, 14, 0, obs)
	g := engine.NewInferenceGraph()
	enc := encodeSamples(t, n, g, s)
	rows := obs * per
	masks := make([][]bool, rows)
	for i := range masks {
		masks[i] = make([]bool, n.c)
	}
	logq := make([]float64, rows)
	logits := make([]float32, rows*n.c)
	n.sampleChunk(enc, 0, obs, per, 0.5, rand.New(rand.NewPCG(1, 1)), masks, logq, logits)
	tf, err := n.MaskLogits(g, enc, 0.5, masks)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range tf.Data {
		if math.Abs(float64(v-logits[i])) > 1e-4 {
			t.Fatalf("%s, %d×%d: row %d position %d: cached logit %v, teacher-forced %v", name, obs, per, i/n.c, i%n.c, logits[i], v)
		}
	}
	lp := MaskLogProb(tf, masks, nil)
	for i := range lp {
		if math.Abs(lp[i]-logq[i]) > 1e-4*float64(n.c) {
			t.Fatalf("%s, %d×%d: row %d: sampler log q %v, teacher-forced %v", name, obs, per, i, logq[i], lp[i])
		}
	}
	distinct := map[string]bool{}
	for _, m := range masks {
		distinct[fmt.Sprint(m)] = true
	}
	if len(distinct) < 2 {
		t.Fatalf("%s, %d×%d: all %d sampled masks are equal; the test needs diverging prefixes", name, obs, per, rows)
	}
	// The public sampler (chunked, observation-major) gives the same
	// masks for the same random stream when one chunk holds them all.
	m2, lq2, err := n.SampleMasks(enc, 0.5, per, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m2 {
		if !slices.Equal(m2[i], masks[i]) || lq2[i] != logq[i] {
			t.Fatalf("%s, %d×%d: SampleMasks row %d differs from the single chunk", name, obs, per, i)
		}
	}
}

// TestSampleMasksFrequencies checks the sampler against its own exact
// probabilities on lingauss-k6 (C = 7 with one noise component, so at most
// 2^7 masks): the empirical frequency of every mask must match
// exp(log q) within 5 binomial standard errors (plus 1/N for rounding).
func TestSampleMasksFrequencies(t *testing.T) {
	n := newNet(t, "lingauss-k6", tinyConfig, 15)
	perturbParams(n, 0.3, 16)
	s := simulate(n.fam, 17, 0, 1)
	g := engine.NewInferenceGraph()
	enc := encodeSamples(t, n, g, s)
	const draws = 4000
	masks, logq, err := n.SampleMasks(enc, 0.5, draws, rand.New(rand.NewPCG(2, 3)))
	if err != nil {
		t.Fatal(err)
	}
	checkFrequencies(t, masks, logq)
}

// checkFrequencies compares the frequency of every mask drawn for one
// observation with exp(log q) reported for it: within 5 binomial standard
// errors plus one draw.
func checkFrequencies(t *testing.T, masks [][]bool, logq []float64) {
	t.Helper()
	draws := float64(len(masks))
	count := map[string]int{}
	prob := map[string]float64{}
	for i, m := range masks {
		k := family.MaskString(m)
		count[k]++
		prob[k] = math.Exp(logq[i])
	}
	for k, c := range count {
		p := prob[k]
		se := math.Sqrt(p * (1 - p) / draws)
		if f := float64(c) / draws; math.Abs(f-p) > 5*se+1/draws {
			t.Fatalf("mask %s: frequency %v, q = %v (se %v)", k, f, p, se)
		}
	}
}

// TestDenoiseVJP checks the θ_σ-Jacobian of Denoise used for exact
// divergences: seeding e_j in every row, BackwardFrom must give
// ∂D[b, j]/∂θ_σ[b, :] equal to central differences of Denoise (step 1e-2
// in float32: rounding error ~1e-7/1e-2 ≈ 1e-5, truncation ~h²·D‴ ≈ 1e-4;
// tolerance 2e-3 + 1e-2·|value|).
func TestDenoiseVJP(t *testing.T) {
	n := newNet(t, "b3s", tinyConfig, 18)
	perturbParams(n, 0.3, 19)
	s := simulate(n.fam, 20, 0, 2)
	b, dm := len(s), n.dmax
	masks := [][]bool{s[0].Mask, s[1].Mask}
	th := make([]float32, b*dm)
	for i := range s {
		for j, v := range s[i].Theta {
			th[i*dm+j] = float32(v)
		}
	}
	sig := []float64{0.7}
	g := engine.NewGraph()
	enc := encodeSamples(t, n, g, s)
	x := g.Variable(th, b, dm)
	d, err := n.Denoise(g, enc, masks, x, sig)
	if err != nil {
		t.Fatal(err)
	}
	ig := engine.NewInferenceGraph()
	encI := encodeSamples(t, n, ig, s)
	eval := func(v []float32) []float32 {
		ig2 := engine.NewInferenceGraph()
		out, _ := n.Denoise(ig2, encI, masks, ig2.Input(v, b, dm), sig)
		return out.Data
	}
	seed := make([]float32, b*dm)
	const h = 1e-2
	for j := range dm {
		clear(seed)
		for r := range b {
			seed[r*dm+j] = 1
		}
		g.BackwardFrom(d, seed)
		for r := range b {
			for k := range dm {
				p, m := slices.Clone(th), slices.Clone(th)
				p[r*dm+k] += h
				m[r*dm+k] -= h
				fd := (float64(eval(p)[r*dm+j]) - float64(eval(m)[r*dm+j])) / (2 * h)
				got := float64(x.Grad[r*dm+k])
				if math.Abs(fd-got) > 2e-3+1e-2*math.Abs(fd) {
					t.Fatalf("∂D[%d,%d]/∂θ_σ[%d,%d]: VJP %v, finite difference %v", r, j, r, k, got, fd)
				}
			}
		}
	}
}

// TestEncoderMeasurementPermutation: the dMRI encoder has no positional
// embedding, so permuting the measurements of an observation permutes the
// encoder tokens and leaves the decoders' outputs unchanged (up to float32
// summation order in the attention: 1e-4 on O(1) logits). It also encodes
// observations of a length never seen in training.
func TestEncoderMeasurementPermutation(t *testing.T) {
	n := newNet(t, "b3s", tinyConfig, 21)
	perturbParams(n, 0.3, 22)
	s := simulate(n.fam, 23, 0, 1)
	d, x := s[0].Design, s[0].X
	r := rand.New(rand.NewPCG(4, 4))
	perm := r.Perm(d.N)
	m := 37 // a different length: the first 37 measurements
	d2 := family.Design{N: m, CovDim: 4, Cov: make([]float64, 4*m)}
	x2 := make([]float64, m)
	for i := range m {
		copy(d2.Cov[4*i:4*i+4], d.Row(perm[i]))
		x2[i] = x[perm[i]]
	}
	d1 := family.Design{N: m, CovDim: 4, Cov: make([]float64, 4*m)}
	copy(d1.Cov, d2.Cov)
	x1 := slices.Clone(x2)
	// reverse the order for the second copy
	for i := range m {
		copy(d1.Cov[4*i:4*i+4], d2.Cov[4*(m-1-i):4*(m-i)])
		x1[i] = x2[m-1-i]
	}
	g := engine.NewInferenceGraph()
	e1, err := n.Encode(g, []Observation{{d1, x1}})
	if err != nil {
		t.Fatal(err)
	}
	e2, _ := n.Encode(g, []Observation{{d2, x2}})
	if e1.Shape[1] != m {
		t.Fatalf("encoder tokens %v for %d measurements", e1.Shape, m)
	}
	masks := [][]bool{s[0].Mask}
	l1, _ := n.MaskLogits(g, e1, 0.3, masks)
	l2, _ := n.MaskLogits(g, e2, 0.3, masks)
	for i := range l1.Data {
		if math.Abs(float64(l1.Data[i]-l2.Data[i])) > 1e-4 {
			t.Fatalf("logit %d: %v vs %v after reordering the measurements", i, l1.Data[i], l2.Data[i])
		}
	}
	for i := range m { // token i of e1 is token m−1−i of e2
		a := e1.Data[i*n.cfg.ModelDim : (i+1)*n.cfg.ModelDim]
		b := e2.Data[(m-1-i)*n.cfg.ModelDim : (m-i)*n.cfg.ModelDim]
		for k := range a {
			if math.Abs(float64(a[k]-b[k])) > 1e-4 {
				t.Fatalf("token %d feature %d: %v vs %v", i, k, a[k], b[k])
			}
		}
	}
}

// TestGridTokens checks the grid-observation features on a hand-made
// vector against their definitions.
func TestGridTokens(t *testing.T) {
	y := []float64{1, 2, 3, 4, 1000, -5}
	const p = 4 // 2 tokens, the second padded
	out := make([]float32, 2*gridFeatures(p))
	gridTokens(y, p, out)
	mean := (1 + 2 + 3 + 4 + 1000 - 5) / 6.0
	ss := 0.0
	for _, v := range y {
		ss += (v - mean) * (v - mean)
	}
	sd := math.Sqrt(ss / 6)
	f := gridFeatures(p)
	for i := range 8 {
		tok, j := i/p, i%p
		row := out[tok*f : (tok+1)*f]
		wantZ, wantA := 0.0, 0.0
		if i < len(y) {
			wantZ, wantA = (y[i]-mean)/sd, math.Asinh(y[i])
		}
		if math.Abs(float64(row[j])-wantZ) > 1e-6 || math.Abs(float64(row[p+j])-wantA) > 1e-6 {
			t.Fatalf("point %d: features (%v, %v), want (%v, %v)", i, row[j], row[p+j], wantZ, wantA)
		}
		if math.Abs(float64(row[2*p])-math.Asinh(mean)) > 1e-6 || math.Abs(float64(row[2*p+1])-math.Log(sd)) > 1e-6 {
			t.Fatalf("token %d summary (%v, %v), want (%v, %v)", tok, row[2*p], row[2*p+1], math.Asinh(mean), math.Log(sd))
		}
	}
}

// TestDMRITokens checks b̃, the squashed signal and the repeated b-vector.
func TestDMRITokens(t *testing.T) {
	n := newNet(t, "b3s", DefaultConfig, 1)
	d := family.Design{N: 3, CovDim: 4, Cov: []float64{0, 1, 0, 0, 2000, 0, 0.6, 0.8, 9000, 0.6, 0, -0.8}}
	s := []float64{1, 0.5, 0}
	f := dmriFeatures(n.cfg.Diffusion)
	bt := make([]float32, 3)
	feat := make([]float32, 3*f)
	dmriTokens(n.cfg.Diffusion, d, s, bt, feat)
	wantB := []float32{-1, 0, 1}
	for j := range 3 {
		if bt[j] != wantB[j] {
			t.Fatalf("b̃[%d] = %v, want %v", j, bt[j], wantB[j])
		}
		row := feat[j*f : (j+1)*f]
		sq := 1 / (1 + math.Exp(-(s[j]-0.5)/0.5))
		for k := range 12 {
			if math.Abs(float64(row[k])-sq) > 1e-7 {
				t.Fatalf("signal feature %d of %d = %v, want %v", k, j, row[k], sq)
			}
		}
		for a := range 3 {
			for k := range 4 {
				if row[12+4*a+k] != float32(d.Row(j)[1+a]) {
					t.Fatalf("b-vector feature %d of %d = %v, want %v", 12+4*a+k, j, row[12+4*a+k], d.Row(j)[1+a])
				}
			}
		}
	}
	if f+n.cfg.Diffusion.BEmbed != 36 {
		t.Fatalf("dMRI token input width %d, want 36 (the reference implementation's token width)", f+n.cfg.Diffusion.BEmbed)
	}
}

// TestDMRITensorFeatures checks the optional g gᵀ and s·g gᵀ blocks: their
// quadratic form with any unit vector u reproduces (g·u)² and s·(g·u)²
// (the √2 scaling makes the six entries an isometry of symmetric
// matrices), and they vanish for b = 0.
func TestDMRITensorFeatures(t *testing.T) {
	cfg := DefaultConfig(nil)
	cfg.Diffusion.TensorFeatures = true
	n := newNet(t, "b3s", func(family.Family) Config { return cfg }, 1)
	d := family.Design{N: 2, CovDim: 4, Cov: []float64{0, 0.6, 0.8, 0, 2000, 0.6, 0, -0.8}}
	s := []float64{1, 0.4}
	f := dmriFeatures(n.cfg.Diffusion)
	if f+n.cfg.Diffusion.BEmbed != 36+12 {
		t.Fatalf("token width %d, want 48", f+n.cfg.Diffusion.BEmbed)
	}
	bt := make([]float32, 2)
	feat := make([]float32, 2*f)
	dmriTokens(n.cfg.Diffusion, d, s, bt, feat)
	for k := 24; k < 36; k++ {
		if feat[k] != 0 {
			t.Fatalf("b = 0 tensor feature %d = %v, want 0", k-24, feat[k])
		}
	}
	row := feat[f+24 : 2*f]
	u := [3]float64{0.48, -0.6, 0.64}
	// ⟨G, u uᵀ⟩ with the same √2 packing equals (g·u)².
	uu := [6]float64{u[0] * u[0], u[1] * u[1], u[2] * u[2], math.Sqrt2 * u[0] * u[1], math.Sqrt2 * u[0] * u[2], math.Sqrt2 * u[1] * u[2]}
	var q, qs float64
	for k := range 6 {
		q += float64(row[k]) * uu[k]
		qs += float64(row[6+k]) * uu[k]
	}
	gu := 0.6*u[0] - 0.8*u[2]
	// float32 storage: relative error ≤ 1e-7 per entry.
	if math.Abs(q-gu*gu) > 1e-6 || math.Abs(qs-0.4*gu*gu) > 1e-6 {
		t.Fatalf("quadratic forms %v, %v, want %v, %v", q, qs, gu*gu, 0.4*gu*gu)
	}
}
