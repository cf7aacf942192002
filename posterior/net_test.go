package posterior

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/network"
)

// untrained returns a Posterior on a tiny network of the named family
// whose parameters are perturbed by N(0, 0.3²) noise, so that every part
// of the network (zero-initialised decoders included) shapes its output.
func untrained(t testing.TB, name string, seed uint64) *Posterior {
	t.Helper()
	f, err := family.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	net, err := network.New(f, tinyConfig(f), seed)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 99))
	for _, p := range net.Params().All() {
		for i := range p.Data {
			p.Data[i] += float32(0.3 * r.NormFloat64())
		}
	}
	return New(net)
}

// simulated returns n observations of one design from the family's
// default mix, with their true masks.
func simulated(t testing.TB, f family.Family, n int, seed uint64) ([]Observation, [][]bool) {
	t.Helper()
	s0 := make([]family.Sample, 1)
	family.SimulateBatch(f, family.SimOptions{Seed: seed, Lambda: 0.5}, 0, s0)
	s := make([]family.Sample, n)
	family.SimulateBatch(f, family.SimOptions{Seed: seed, Lambda: 0.5, Designs: family.FixedDesign(s0[0].Design)}, 0, s)
	obs := make([]Observation, n)
	masks := make([][]bool, n)
	for i := range s {
		obs[i] = Observation{Design: s[i].Design, X: s[i].X}
		masks[i] = s[i].Mask
	}
	return obs, masks
}

// TestNetJacobian checks the network denoiser's Jacobian (one VJP per
// dimension, all rows at once) against central differences of its
// float32 forward pass. The perturbed network is strongly curved in some
// directions (step 1e−2 still left truncation errors of 1e−2 there, 3e−2
// of 0.1), so the step is 3e−3: truncation ~h²·D‴ ≲ 1e−3 and rounding
// ~1e−7·|D|/h ≲ 3e−4 for |D| ≲ 10; tolerance 2e−3 + 1e−2·|value|.
// Entries involving inactive dimensions are not used and not checked.
func TestNetJacobian(t *testing.T) {
	p := untrained(t, "b3s", 21)
	obs, masks := simulated(t, p.fam, 2, 22)
	g := engine.NewInferenceGraph()
	enc, err := p.net.Encode(g, obs)
	if err != nil {
		t.Fatal(err)
	}
	dm := p.dmax
	rows := 4 // 2 rows per observation
	rowMasks := [][]bool{masks[0], masks[0], masks[1], masks[1]}
	active := make([]bool, rows*dm)
	theta := make([]float64, rows*dm)
	r := rand.New(rand.NewPCG(1, 2))
	for row := range rows {
		p.layout.Active(rowMasks[row], active[row*dm:(row+1)*dm])
		for k := range dm {
			theta[row*dm+k] = r.NormFloat64()
		}
	}
	den := newNetDenoiser(p.net, g, enc, rowMasks, active, dm, 2)
	const sigma = 0.7
	d := make([]float64, rows*dm)
	jac := make([]float64, rows*dm*dm)
	if err := den.Denoise(theta, sigma, d, jac); err != nil {
		t.Fatal(err)
	}
	// The plain evaluation runs per mask on active tokens only; it must
	// agree with the full-batch evaluation of the Jacobian path up to
	// float32 summation order (1e-5 absolute for |D| = O(1)).
	plain := make([]float64, rows*dm)
	if err := den.Denoise(theta, sigma, plain, nil); err != nil {
		t.Fatal(err)
	}
	for i := range d {
		if math.Abs(plain[i]-d[i]) > 1e-5 {
			t.Fatalf("plain D[%d] = %v, Jacobian-path D = %v", i, plain[i], d[i])
		}
	}
	const h = 3e-3
	dp, dn := make([]float64, rows*dm), make([]float64, rows*dm)
	checked := 0
	for row := range rows {
		for k := range dm {
			if !active[row*dm+k] {
				continue
			}
			th := slices.Clone(theta)
			th[row*dm+k] += h
			if err := den.Denoise(th, sigma, dp, nil); err != nil {
				t.Fatal(err)
			}
			th[row*dm+k] -= 2 * h
			if err := den.Denoise(th, sigma, dn, nil); err != nil {
				t.Fatal(err)
			}
			for i := range dm {
				if !active[row*dm+i] {
					continue
				}
				fd := (dp[row*dm+i] - dn[row*dm+i]) / (2 * h)
				got := jac[(row*dm+i)*dm+k]
				if math.Abs(got-fd) > 2e-3+1e-2*math.Abs(fd) {
					t.Errorf("row %d ∂D_%d/∂θ_%d = %v, central difference %v", row, i, k, got, fd)
				}
				checked++
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d Jacobian entries checked", checked)
	}
}

// TestNetLogProbIsSampleDensity: on an untrained (perturbed) lingauss network,
// whose q(θ | M, x) is some non-Gaussian distribution, the sampler's
// log q must be the density of its samples. For any normalised density r,
// E_q[r(θ)/q(θ)] = 1; with r the Gaussian fitted to the samples the
// weights have small variance, so log mean exp(log r − log q) must vanish
// within 5 delta-method standard errors. The Jacobian propagation is in
// float64 from float32 network Jacobians, adding ~1e−5 per step (64
// steps: ≲ 1e−3), so the tolerance also has 2e−3. LogProbTheta (upward
// integration of the continuous ODE) must agree with it within its
// discretisation error, measured at ≤ 0.05 here (bound 0.15).
func TestNetLogProbIsSampleDensity(t *testing.T) {
	p := untrained(t, "lingauss-k6", 31)
	obs, _ := simulated(t, p.fam, 1, 32)
	const n = 2000
	so := SampleOptions{Options: Options{Seed: 7}, Steps: 16}
	masks := [][]bool{threeComp}
	ts, err := p.SampleAndLogProb(obs, [][][]bool{Repeat(masks[0], n)}, so)
	if err != nil {
		t.Fatal(err)
	}
	act := p.Active(masks[0])
	var idx []int
	for k, a := range act {
		if a {
			idx = append(idx, k)
		}
	}
	d := len(idx)
	data := mat.NewDense(n, d, nil)
	for j, th := range ts[0].Theta {
		for a, k := range idx {
			data.Set(j, a, th[k])
		}
	}
	var cov mat.SymDense
	statCov(data, &cov)
	mean := make([]float64, d)
	for a := range d {
		mean[a] = mat.Sum(data.ColView(a)) / n
	}
	var chol mat.Cholesky
	if !chol.Factorize(&cov) {
		t.Fatal("sample covariance not positive definite")
	}
	logDet := chol.LogDet()
	lr := make([]float64, n)
	x := mat.NewVecDense(d, nil)
	y := mat.NewVecDense(d, nil)
	for j := range n {
		for a := range d {
			x.SetVec(a, data.At(j, a)-mean[a])
		}
		if err := chol.SolveVecTo(y, x); err != nil {
			t.Fatal(err)
		}
		lr[j] = -0.5*(mat.Dot(x, y)+logDet+float64(d)*math.Log(2*math.Pi)) - ts[0].LogQ[j]
	}
	norm, se := LogMeanExp(lr)
	t.Logf("d = %d: log E_q[r/q] = %.2e ± %.1e (ESS of r/q %.3f)", d, norm, se, ESS(lr))
	if math.Abs(norm) > 5*se+2e-3 {
		t.Fatalf("log E_q[r/q] = %.3g ± %.2g: log q is not the density of the samples", norm, se)
	}
}

// statCov writes the sample covariance of the rows of x into c.
func statCov(x *mat.Dense, c *mat.SymDense) {
	n, d := x.Dims()
	mean := make([]float64, d)
	for a := range d {
		mean[a] = mat.Sum(x.ColView(a)) / float64(n)
	}
	c.ReuseAsSym(d)
	for a := range d {
		for b := a; b < d; b++ {
			s := 0.0
			for j := range n {
				s += (x.At(j, a) - mean[a]) * (x.At(j, b) - mean[b])
			}
			c.SetSym(a, b, s/float64(n-1))
		}
	}
}

// TestChunkInvariance: parameter samples depend only on (seed, global
// observation index, sample index), so splitting the rows into other
// chunks or the observations into two calls with Offset must give the
// same samples. The network's kernels compute each row independently of
// the others, so the samples agree bit for bit.
func TestChunkInvariance(t *testing.T) {
	p := untrained(t, "b3s", 41)
	obs, masks := simulated(t, p.fam, 3, 42)
	const n = 50
	rows := make([][][]bool, 3)
	for i := range rows {
		rows[i] = Repeat(masks[i], n)
	}
	so := SampleOptions{Options: Options{Seed: 9}, Steps: 8}
	all, err := p.SampleTheta(obs, rows, so)
	if err != nil {
		t.Fatal(err)
	}
	so2 := so
	so2.ChunkRows = 30 // observations split over chunks of 25 rows
	split, err := p.SampleTheta(obs, rows, so2)
	if err != nil {
		t.Fatal(err)
	}
	so3 := so
	so3.Offset = 2
	last, err := p.SampleTheta(obs[2:], rows[2:], so3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range obs {
		for j := range n {
			if !slices.Equal(all[i].Theta[j], split[i].Theta[j]) {
				t.Fatalf("obs %d sample %d: %v with one chunk, %v with chunks of 25 rows", i, j, all[i].Theta[j], split[i].Theta[j])
			}
		}
	}
	for j := range n {
		if !slices.Equal(all[2].Theta[j], last[0].Theta[j]) {
			t.Fatalf("sample %d of observation 2: %v in one call, %v with Offset 2", j, all[2].Theta[j], last[0].Theta[j])
		}
	}

	// Masks: with n ≥ 256 every observation has its own stream.
	ms, err := p.SampleMasks(obs, 0.5, 300, Options{Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	ms2, err := p.SampleMasks(obs[1:], 0.5, 300, Options{Seed: 4, Offset: 1})
	if err != nil {
		t.Fatal(err)
	}
	for j := range 300 {
		if !slices.Equal(ms[1].Masks[j], ms2[0].Masks[j]) || ms[1].LogQ[j] != ms2[0].LogQ[j] {
			t.Fatalf("mask %d of observation 1 differs between one call and Offset 1", j)
		}
	}
}

// TestRankings checks TopK, Discover and MostSelected on an untrained
// lingauss network against LogProbMasks: TopK returns the candidates in
// decreasing exact log q with the evidence proxy log q − log p(M|λ);
// Discover's masks are distinct, their counts add up to the number of
// draws, and their log q (from the KV-cached sampler) equals the
// teacher-forced log q to float32 accuracy (1e−4 for sums of 7 terms).
func TestRankings(t *testing.T) {
	p := untrained(t, "lingauss-k6", 51)
	obs, _ := simulated(t, p.fam, 2, 52)
	var cands [][]bool
	for idx := range 64 {
		m := make([]bool, 7)
		for k := range 6 {
			m[k] = idx>>k&1 == 1
		}
		m[6] = true
		cands = append(cands, m)
	}
	const lambda = 0.4
	top, err := p.TopK(obs, lambda, cands, 5, Options{})
	if err != nil {
		t.Fatal(err)
	}
	lq, err := p.LogProbMasks(obs, lambda, [][][]bool{cands}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range obs {
		best := slices.Max(lq[i])
		if len(top[i]) != 5 || top[i][0].LogQ != best {
			t.Fatalf("obs %d: top %v, best log q %v", i, top[i], best)
		}
		for r := 1; r < 5; r++ {
			if top[i][r].LogQ > top[i][r-1].LogQ {
				t.Fatalf("obs %d: ranking not sorted: %v", i, top[i])
			}
		}
		for _, rk := range top[i] {
			want := rk.LogQ - p.fam.MaskPrior().LogProb(rk.Mask, lambda)
			if math.Abs(rk.EvidenceProxy-want) > 1e-12 {
				t.Fatalf("evidence proxy %v, want %v", rk.EvidenceProxy, want)
			}
		}
	}
	const draws = 400
	disc, err := p.Discover(obs, lambda, draws, 0, Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i, rs := range disc {
		total := 0
		seen := map[string]bool{}
		dm := make([][]bool, len(rs))
		for j, r := range rs {
			total += r.Count
			k := family.MaskString(r.Mask)
			if seen[k] {
				t.Fatalf("obs %d: mask %s listed twice", i, k)
			}
			seen[k] = true
			dm[j] = r.Mask
			if j > 0 && r.Outside == rs[j-1].Outside && r.LogQ > rs[j-1].LogQ {
				t.Fatalf("obs %d: discoveries not sorted by log q", i)
			}
		}
		if total != draws {
			t.Fatalf("obs %d: counts add up to %d, want %d", i, total, draws)
		}
		exact, err := p.LogProbMasks(obs[i:i+1], lambda, [][][]bool{dm}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for j, r := range rs {
			if math.Abs(r.LogQ-exact[0][j]) > 1e-4 {
				t.Fatalf("obs %d mask %s: sampler log q %v, teacher forcing %v", i, family.MaskString(r.Mask), r.LogQ, exact[0][j])
			}
		}
	}
	sel, counts := MostSelected(disc, 1)
	if len(sel) != 1 || counts[0] < 1 {
		t.Fatalf("MostSelected: %v %v", sel, counts)
	}
}

// TestSupportedMasks: an untrained symbolic-k15 network puts mass on masks
// with two noise models, which the family's prior excludes; the global
// predictive's draws must all lie in the prior's support (and the test
// checks that the raw draws did not, so the replacement was exercised).
func TestSupportedMasks(t *testing.T) {
	p := untrained(t, "symbolic-k15", 31)
	obs, _ := simulated(t, p.fam, 2, 32)
	const n, lambda = 200, 0.5
	prior := p.fam.MaskPrior()
	raw, err := p.SampleMasks(obs, lambda, n, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for _, ms := range raw {
		for _, m := range ms.Masks {
			if math.IsInf(prior.LogProb(m, lambda), -1) {
				bad++
			}
		}
	}
	t.Logf("%d of %d raw draws were outside the support", bad, 2*n)
	if bad == 0 {
		t.Fatal("the untrained network drew no unsupported mask; the test needs some")
	}
	got, err := p.SampleMasksSupported(obs, lambda, n, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if len(got[i]) != n {
			t.Fatalf("observation %d: %d masks, want %d", i, len(got[i]), n)
		}
		for _, m := range got[i] {
			if math.IsInf(prior.LogProb(m, lambda), -1) {
				t.Fatalf("observation %d: unsupported mask %v kept", i, m)
			}
		}
	}
}

// TestImpossibleModels: masks outside the prior's support are refused as
// candidates and as the fixed model of a local predictive (the error names
// the mask), and when the network draws them in Discover they are marked
// Outside, ranked after every supported mask and never selected by
// MostSelected.
func TestImpossibleModels(t *testing.T) {
	p := untrained(t, "symbolic-k15", 31)
	obs, _ := simulated(t, p.fam, 2, 32)
	c := len(p.fam.Components())
	good := make([]bool, c)
	good[0], good[c-1] = true, true
	if err := family.CheckMask(p.fam, good); err != nil {
		t.Fatalf("test mask: %v", err)
	}
	zero := make([]bool, c)
	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"TopK", func() error { _, err := p.TopK(obs, 0.5, [][]bool{good, zero}, 0, Options{}); return err }},
		{"Predict --local", func() error {
			_, err := p.Predict(obs, PredictOptions{SampleOptions: SampleOptions{Steps: 2}, Mask: zero, Samples: 4})
			return err
		}},
	} {
		err := tc.run()
		if err == nil || !strings.Contains(err.Error(), family.MaskString(zero)) || !strings.Contains(err.Error(), "outside the support") {
			t.Errorf("%s with the all-zero mask: err = %v", tc.name, err)
		}
	}
	disc, err := p.Discover(obs, 0.5, 200, 0, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	outside := 0
	for i, rs := range disc {
		for j, r := range rs {
			if r.Outside != math.IsInf(p.fam.MaskPrior().LogProb(r.Mask, 0.5), -1) {
				t.Fatalf("observation %d rank %d: Outside = %v for log prior %v", i, j, r.Outside, r.LogPrior)
			}
			if r.Outside {
				outside++
			} else if j > 0 && rs[j-1].Outside {
				t.Fatalf("observation %d: supported mask at rank %d after an outside one", i, j)
			}
		}
		if rs[0].Outside && !rs[len(rs)-1].Outside {
			t.Fatalf("observation %d: the approximate MAP model is outside the support", i)
		}
	}
	if outside == 0 {
		t.Fatal("the untrained network drew no unsupported mask; the test needs some")
	}
	masks, _ := MostSelected(disc, 0)
	for _, m := range masks {
		if family.CheckMask(p.fam, m) != nil {
			t.Fatalf("MostSelected returned the unsupported mask %s", family.MaskString(m))
		}
	}
}

// TestChunkInvarianceOddSegments is TestChunkInvariance for the b3s model
// ball + 2 sticks + noise (6 active parameter tokens, Dh = 16): with 15
// rows per observation and chunks of 7 rows, the chunks cut the
// observations' segments after an odd number of rows, so a row's queries
// sit at other positions of the cross-attention call than in one chunk.
// The samples must still agree bit for bit.
func TestChunkInvarianceOddSegments(t *testing.T) {
	f, err := family.Lookup("b3s")
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig(f)
	cfg.ModelDim, cfg.Heads, cfg.HeadDim = 32, 2, 16
	net, err := network.New(f, cfg, 43)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(43, 99))
	for _, p := range net.Params().All() {
		for i := range p.Data {
			p.Data[i] += float32(0.3 * r.NormFloat64())
		}
	}
	p := New(net)
	obs, _ := simulated(t, f, 4, 44)
	const n = 15
	rows := make([][][]bool, len(obs))
	for i := range rows {
		rows[i] = Repeat([]bool{true, true, true, false, true}, n)
	}
	so := SampleOptions{Options: Options{Seed: 9}, Steps: 4}
	all, err := p.SampleTheta(obs, rows, so)
	if err != nil {
		t.Fatal(err)
	}
	so.ChunkRows = 7
	split, err := p.SampleTheta(obs, rows, so)
	if err != nil {
		t.Fatal(err)
	}
	for i := range obs {
		for j := range n {
			if !slices.Equal(all[i].Theta[j], split[i].Theta[j]) {
				t.Fatalf("obs %d sample %d: %v in one chunk, %v in chunks of 7 rows", i, j, all[i].Theta[j], split[i].Theta[j])
			}
		}
	}
}
