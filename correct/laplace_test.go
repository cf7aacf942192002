package correct

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/prismsbi/prism/family"
	fdmri "github.com/prismsbi/prism/family/dmri"
	"github.com/prismsbi/prism/posterior"
)

// TestChartRoundTrip: z → y → z is the identity (up to rounding) for
// directions anywhere on the hemisphere, including near its rim and the
// azimuth's cut at ±π, and the chart's log-Jacobian matches a central
// difference of y(z).
func TestChartRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		z0 := []float64{r.NormFloat64() * 2, r.NormFloat64() * 2, r.NormFloat64()}
		c := newChart(3, [][2]int{{0, 1}}, z0)
		z := []float64{clamp3(r.NormFloat64() * 1.5), clamp3(r.NormFloat64() * 1.5), r.NormFloat64()}
		y, z2 := make([]float64, 3), make([]float64, 3)
		lj, ok := c.toY(z, y)
		if !ok || !c.toZ(y, z2) {
			t.Fatalf("chart undefined at %v", z)
		}
		for a := range z {
			// Φ⁻¹ after Φ loses ≈ 1e−12 relative in the tails.
			if math.Abs(z2[a]-z[a]) > 1e-7*(1+math.Abs(z[a])) {
				t.Fatalf("z %v → y %v → z %v", z, y, z2)
			}
		}
		// log |∂y/∂z| by central differences (step 1e−5: error ≈ 1e−9
		// relative in each entry).
		const h = 1e-5
		var j [2][2]float64
		yp, ym := make([]float64, 3), make([]float64, 3)
		for b := range 2 {
			zp := append([]float64(nil), z...)
			zp[b] += h
			c.toY(zp, yp)
			zp[b] -= 2 * h
			c.toY(zp, ym)
			for a := range 2 {
				j[a][b] = (yp[a] - ym[a]) / (2 * h)
			}
		}
		det := math.Abs(j[0][0]*j[1][1] - j[0][1]*j[1][0])
		if math.Abs(math.Log(det)-lj) > 1e-4 {
			t.Fatalf("log|∂y/∂z| %v, chart says %v (z %v)", math.Log(det), lj, z)
		}
	}
}

// TestLaplaceRefNormalised: the reference's density on z integrates to 1
// (importance sampling from N(0, I), whose prior-weighted estimate
// (1/n) Σ r(z)/N(z) has its standard error computed from the draws; the
// test allows 5 of them) for a centre on the hemisphere's rim, where the
// chart's fold matters, and its draws have the density's moments.
func TestLaplaceRefNormalised(t *testing.T) {
	for _, z0 := range [][]float64{{2.5, 0.3, 0.2}, {0.2, 2.9, -0.4}, {-1, -0.5, 0}} {
		c := newChart(3, [][2]int{{0, 1}}, z0)
		mu := make([]float64, 3)
		c.toY(z0, mu)
		cov := []float64{0.3, 0.05, 0, 0.05, 0.2, 0.02, 0, 0.02, 0.5}
		ref := newLaplaceRef(c, mu, cov)
		rs := ref.scratch()
		r := rand.New(rand.NewPCG(3, 4))
		n := 400000
		z := make([]float64, 3)
		var s1, s2 float64
		for range n {
			q := 0.0
			for a := range z {
				z[a] = r.NormFloat64() * 2.5
				q += -0.5*z[a]*z[a]/6.25 - math.Log(2.5) - 0.5*math.Log(2*math.Pi)
			}
			w := math.Exp(ref.logProb(z, nil, rs) - q)
			s1 += w
			s2 += w * w
		}
		m := s1 / float64(n)
		se := math.Sqrt((s2/float64(n) - m*m) / float64(n))
		t.Logf("centre %v: ∫ r = %.4f ± %.4f", z0, m, se)
		if math.Abs(m-1) > 5*se || se > 0.02 {
			t.Errorf("centre %v: ∫ r = %.4f ± %.4f, want 1", z0, m, se)
		}
	}
}

// clamp3 keeps a latent within ±3, where central differences of the
// hemisphere bijection are accurate (beyond, φ = 2πΦ(z2) − π cancels).
func clamp3(v float64) float64 { return math.Max(-3, math.Min(3, v)) }

// TestLaplaceLingauss runs the Laplace-start SMC on the Gaussian lingauss
// posterior (no axes, no symmetry): 24 independent runs of 256
// particles. Their log evidences must agree with the closed form within 4
// standard errors of their mean (spread/√24), the runs' own Lee–Whiteley
// standard errors must match their spread (ratio in [0.5, 2]: with 24
// runs the sample sd is within ±30 % at 2σ), and the weighted particles
// must have the exact posterior's moments (±0.15 sd, as TestSMCExact).
func TestLaplaceLingauss(t *testing.T) {
	tg, lf, x := lingaussTarget(t)
	mean, cov := lf.ParamPosterior(x, threeComp)
	exact := lf.LogEvidence(x, threeComp)
	s, err := DefaultSettings(SMC).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	s.Particles, s.Moves = 256, 2
	s.Laplace = &LaplaceOptions{}
	o := posterior.Observation{Design: tg.design, X: x}
	rng := rand.New(rand.NewPCG(7, 8))
	draws := make([][]float64, 8)
	for j := range draws {
		draws[j] = make([]float64, lf.Layout().DMax)
		for _, p := range tg.idx {
			draws[j][p] = mean[p] + 3*math.Sqrt(cov[p][p])*rng.NormFloat64()
		}
	}
	const runs = 24
	var lz, ses []float64
	d := len(tg.idx)
	sum, sum2 := make([]float64, d), make([]float64, d)
	for r := range runs {
		res := laplaceModel(lf, o, threeComp, draws, s, rand.New(rand.NewPCG(9, uint64(r))))
		if res.Failed {
			t.Fatalf("run %d failed: %s", r, res.Reason)
		}
		lz = append(lz, res.LogEvidence)
		ses = append(ses, res.LogEvidenceSE)
		for j, th := range res.Theta {
			w := math.Exp(res.LogW[j]) / runs
			for a, p := range tg.idx {
				sum[a] += w * th[p]
				sum2[a] += w * th[p] * th[p]
			}
		}
	}
	m, sd := meanSD(lz)
	sort.Float64s(ses)
	med := ses[runs/2]
	t.Logf("log Z %.4f (sd %.4f over runs, median SE %.4f), exact %.4f", m, sd, med, exact)
	if math.Abs(m-exact) > 4*sd/math.Sqrt(runs)+1e-3 {
		t.Errorf("log Z %.4f ± %.4f, exact %.4f", m, sd/math.Sqrt(runs), exact)
	}
	if r := sd / med; r < 0.5 || r > 2 {
		t.Errorf("spread of log Z %.4f against a median SE of %.4f", sd, med)
	}
	for a, p := range tg.idx {
		mu := sum[a]
		sdv := math.Sqrt(sum2[a] - mu*mu)
		esd := math.Sqrt(cov[p][p])
		if math.Abs(mu-mean[p]) > 0.15*esd || math.Abs(sdv/esd-1) > 0.15 {
			t.Errorf("dim %d: mean %.4f sd %.4f, exact %.4f and %.4f", p, mu, sdv, mean[p], esd)
		}
	}
}

func meanSD(x []float64) (float64, float64) {
	m := 0.0
	for _, v := range x {
		m += v
	}
	m /= float64(len(x))
	s := 0.0
	for _, v := range x {
		s += (v - m) * (v - m)
	}
	return m, math.Sqrt(s / float64(len(x)-1))
}

// TestLaplaceDMRI checks the chart's Jacobian, the SMC and its standard
// error on a realistic posterior against an independent estimator:
// b3s-brain with one stick (direction 30° from the pole, away from the
// hemisphere's rim and the azimuth's cut, so that the posterior is one
// mode in z) on the UKB-like table. The independent estimate is plain
// importance sampling in z — no chart, no tempering — from a
// multivariate t₃ at the mode with twice the Laplace widths (200,000
// samples, delta-method SE). The Laplace SMC (8 runs of 256 particles)
// must agree within 4 combined SEs (the IS SE and the runs' spread/√8)
// plus 0.02 nats (the log-of-mean bias of a run), and its own median SE
// must match the runs' spread within a factor 3 (8 runs: the sample sd
// is within ±50 % at 2σ).
func TestLaplaceDMRI(t *testing.T) {
	f, err := family.Lookup("b3s-brain")
	if err != nil {
		t.Fatal(err)
	}
	des := fdmri.UKBDesign()
	lay := f.Layout()
	mask := []bool{true, true, false, false, true}
	r := rand.New(rand.NewPCG(4, 3))
	theta := make([]float64, lay.DMax)
	for i := range theta {
		theta[i] = 0.5 * r.NormFloat64()
	}
	off := lay.Blocks[1].Offset
	theta[off], theta[off+1] = family.HemisphereInv(30*math.Pi/180, 0.7)
	tg := simulatedTarget(f, des, r, theta, mask)
	d := len(tg.idx)
	mode := make([]float64, d)
	for a, p := range tg.idx {
		mode[a] = theta[p]
	}
	pc := newPrecond(tg, mode)
	pc, _ = newtonMode(tg, mode, tg.logProb(mode, nil), pc, make([]float64, d), make([]float64, d))
	// Plain IS: t₃ at the mode, scale 4Σ.
	cov := make([]float64, d*d)
	for a := range d {
		for b := range d {
			for k := range d {
				cov[a*d+b] += 4 * pc.v[a*d+k] * pc.v[b*d+k] * pc.isq[k] * pc.isq[k]
			}
		}
	}
	l := cholesky(cov, d)
	const nu, n = 3.0, 200000
	lg1, _ := math.Lgamma((nu + float64(d)) / 2)
	lg2, _ := math.Lgamma(nu / 2)
	lnrm := lg1 - lg2 - 0.5*float64(d)*math.Log(nu*math.Pi) - logDiag(l, d)
	lw := make([]float64, n)
	xi, z, y := make([]float64, d), make([]float64, d), make([]float64, d)
	for j := range lw {
		u := 0.0
		for range 3 {
			v := r.NormFloat64()
			u += v * v
		}
		q := 0.0
		for a := range xi {
			xi[a] = r.NormFloat64()
			q += xi[a] * xi[a]
		}
		lowerMul(l, d, xi, y)
		sc := math.Sqrt(nu / u)
		for a := range z {
			z[a] = mode[a] + sc*y[a]
		}
		lw[j] = tg.logProb(z, nil) - (lnrm - 0.5*(nu+float64(d))*math.Log1p(sc*sc*q/nu))
	}
	is, isSE := posterior.LogMeanExp(lw)
	s, _ := DefaultSettings(SMC).withDefaults()
	s.Particles, s.Moves = 256, 1
	s.Laplace = &LaplaceOptions{Axes: map[int][2]int{1: {off, off + 1}}, Exchangeable: []int{1, 2, 3}}
	o := posterior.Observation{Design: des, X: tg.x}
	const runs = 8
	var lz, ses []float64
	for rr := range runs {
		res := laplaceModel(f, o, mask, [][]float64{theta}, s, rand.New(rand.NewPCG(11, uint64(rr))))
		lz = append(lz, res.LogEvidence)
		ses = append(ses, res.LogEvidenceSE)
	}
	m, sd := meanSD(lz)
	sort.Float64s(ses)
	tol := 4*math.Hypot(isSE, sd/math.Sqrt(runs)) + 0.02
	t.Logf("log Z: Laplace SMC %.4f (sd %.4f over runs, median SE %.4f), plain IS %.4f ± %.4f (ESS %.3f)", m, sd, ses[runs/2], is, isSE, posterior.ESS(lw))
	if math.Abs(m-is) > tol {
		t.Errorf("log Z %.4f, plain IS %.4f (tolerance %.4f)", m, is, tol)
	}
	if q := sd / ses[runs/2]; q < 1.0/3 || q > 3 {
		t.Errorf("spread of log Z %.4f against a median SE of %.4f", sd, ses[runs/2])
	}
}

// TestRelabelDomain: the domain of the relabellings is a fundamental
// domain — of the k! relabellings of any point (its stick directions
// permuted), exactly one lies in it (k = 2, 3; random modes and points).
func TestRelabelDomain(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, k := range []int{2, 3} {
		pos := make([]relabelItem, k)
		for i := range pos {
			pos[i] = relabelItem{axis: true, a1: 2 * i, a2: 2*i + 1}
		}
		perms := permutations(k)
		if len(perms) != []int{0, 0, 2, 6}[k] {
			t.Fatalf("%d permutations of %d", len(perms), k)
		}
		for range 500 {
			z0 := make([]float64, 2*k)
			z := make([]float64, 2*k)
			for a := range z {
				z0[a], z[a] = r.NormFloat64(), 1.5*r.NormFloat64()
			}
			in, logK := relabelDomain([][]relabelItem{pos}, z0)
			if math.Abs(logK-math.Log(float64(len(perms)))) > 1e-12 {
				t.Fatalf("log k! %v for k = %d", logK, k)
			}
			if !in(z0) {
				t.Fatalf("the mode %v is outside its own domain", z0)
			}
			count := 0
			zp := make([]float64, 2*k)
			for _, p := range perms {
				for i, j := range p {
					zp[2*i], zp[2*i+1] = z[2*j], z[2*j+1]
				}
				if in(zp) {
					count++
				}
			}
			if count != 1 {
				t.Fatalf("k = %d: %d of the relabellings of %v in the domain", k, count, z)
			}
		}
	}
}

// TestRelabelDomainGroups: with two groups (two axes, two components
// matched by a key) and sign reflections (one per column of each key
// component's 3×3 lower-triangular factor, as a tensor's), the domain
// of relabelDomain ∧ signDomain is a fundamental domain of the whole
// group: of the 2·2·2⁶ images of a random point exactly one lies in it,
// and the log multiplicities add up to log 256.
func TestRelabelDomainGroups(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	// z: axes at (0,1), (2,3); tensor blocks [4,10), [10,16).
	key := func(b []float64) []float64 {
		var L [3][3]float64
		for i, p := range [6][2]int{{0, 0}, {1, 0}, {1, 1}, {2, 0}, {2, 1}, {2, 2}} {
			L[p[0]][p[1]] = b[i]
		}
		var out []float64
		for i := range 3 {
			for j := 0; j <= i; j++ {
				s := 0.0
				for k := range 3 {
					s += L[i][k] * L[j][k]
				}
				out = append(out, s)
			}
		}
		return out
	}
	groups := [][]relabelItem{
		{{axis: true, a1: 0, a2: 1}, {axis: true, a1: 2, a2: 3}},
		{{lo: 4, hi: 10, key: key}, {lo: 10, hi: 16, key: key}},
	}
	signs := []int{4, 6, 9, 10, 12, 15}
	cols := [][]int{{0, 1, 3}, {2, 4}, {5}}
	for range 300 {
		z0, z := make([]float64, 16), make([]float64, 16)
		for a := range z {
			z0[a], z[a] = r.NormFloat64(), 1.5*r.NormFloat64()
		}
		in, logK := relabelDomain(groups, z0)
		inS, logS := signDomain(signs, z0)
		if math.Abs(logK+logS-math.Log(256)) > 1e-12 {
			t.Fatalf("log multiplicity %v, want log 256", logK+logS)
		}
		if !in(z0) || !inS(z0) {
			t.Fatalf("the mode is outside its own domain")
		}
		count := 0
		for p1 := range 2 {
			for p2 := range 2 {
				for flips := range 64 {
					zp := append([]float64(nil), z...)
					if p1 == 1 {
						zp[0], zp[1], zp[2], zp[3] = z[2], z[3], z[0], z[1]
					}
					if p2 == 1 {
						copy(zp[4:10], z[10:16])
						copy(zp[10:16], z[4:10])
					}
					for c := range 6 {
						if flips>>c&1 == 0 {
							continue
						}
						off := 4 + 6*(c/3)
						for _, i := range cols[c%3] {
							zp[off+i] = -zp[off+i]
						}
					}
					if in(zp) && inS(zp) {
						count++
					}
				}
			}
		}
		if count != 1 {
			t.Fatalf("%d of the 256 images of %v in the domain", count, z)
		}
	}
}

// TestLaplaceTensorSigns checks the sign reflections of a tensor's
// Cholesky factor (LaplaceOptions.Signs) against an independent
// estimator: bszt-brain with one tensor and Gaussian noise on the
// UKB-like table, whose latent posterior has 8 equal copies (the signs
// of L's columns). The independent estimate is plain importance
// sampling over the whole latent space — no chart, no domain, no
// tempering — from the equal mixture of 8 multivariate t₃ at the
// mode's 8 reflections with twice the Laplace widths (200,000 samples,
// delta-method SE). The Laplace SMC with the family's symmetries
// (8 runs of 256 particles) must agree within 4 combined SEs plus 0.02
// nats, as in TestLaplaceDMRI; a missing factor 8 would be off by
// log 8 = 2.08 nats.
func TestLaplaceTensorSigns(t *testing.T) {
	f := fdmri.BSZTBrain()
	des := fdmri.UKBDesign()
	lay := f.Layout()
	mask := make([]bool, len(f.Components()))
	mask[7], mask[10] = true, true // Tensor1, GaussianNoise
	theta := make([]float64, lay.DMax)
	off := lay.Blocks[7].Offset
	copy(theta[off:], []float64{1.3, 0.2, 0.8, -0.1, 0.3, 0.6})
	theta[lay.Blocks[10].Offset] = 0.3
	r := rand.New(rand.NewPCG(8, 9))
	tg := simulatedTarget(f, des, r, theta, mask)
	d := len(tg.idx)
	mode := make([]float64, d)
	pos := map[int]int{}
	for a, p := range tg.idx {
		mode[a] = theta[p]
		pos[p] = a
	}
	pc := newPrecond(tg, mode)
	pc, _ = newtonMode(tg, mode, tg.logProb(mode, nil), pc, make([]float64, d), make([]float64, d))
	cov := make([]float64, d*d)
	for a := range d {
		for b := range d {
			for k := range d {
				cov[a*d+b] += 4 * pc.v[a*d+k] * pc.v[b*d+k] * pc.isq[k] * pc.isq[k]
			}
		}
	}
	// The 8 reflections: sign vectors over z flipping columns of L.
	cols := [][]int{{0, 1, 3}, {2, 4}, {5}}
	var signs [][]float64
	for fl := range 8 {
		sg := make([]float64, d)
		for a := range sg {
			sg[a] = 1
		}
		for c := range 3 {
			if fl>>c&1 == 1 {
				for _, i := range cols[c] {
					sg[pos[off+i]] = -1
				}
			}
		}
		signs = append(signs, sg)
	}
	// A reflection S maps t(mode, Σ) to t(S·mode, SΣS); with z' = S z the
	// mixture density is the mean of t(S z; mode, Σ) over S.
	l := cholesky(cov, d)
	const nu, n = 3.0, 200000
	lg1, _ := math.Lgamma((nu + float64(d)) / 2)
	lg2, _ := math.Lgamma(nu / 2)
	lnrm := lg1 - lg2 - 0.5*float64(d)*math.Log(nu*math.Pi) - logDiag(l, d)
	logT := func(z []float64, sg []float64, acc, dz []float64) float64 {
		for a := range z {
			dz[a] = sg[a]*z[a] - mode[a]
		}
		forward(l, d, dz, acc)
		q := 0.0
		for _, v := range acc {
			q += v * v
		}
		return lnrm - 0.5*(nu+float64(d))*math.Log1p(q/nu)
	}
	lw := make([]float64, n)
	xi, z, y, acc, dz := make([]float64, d), make([]float64, d), make([]float64, d), make([]float64, d), make([]float64, d)
	lt := make([]float64, len(signs))
	for j := range lw {
		u := 0.0
		for range 3 {
			v := r.NormFloat64()
			u += v * v
		}
		for a := range xi {
			xi[a] = r.NormFloat64()
		}
		lowerMul(l, d, xi, y)
		sc := math.Sqrt(nu / u)
		sg := signs[r.IntN(len(signs))]
		for a := range z {
			z[a] = sg[a] * (mode[a] + sc*y[a])
		}
		for k, s := range signs {
			lt[k] = logT(z, s, acc, dz)
		}
		lq, _ := posterior.LogMeanExp(lt)
		lw[j] = tg.logProb(z, nil) - lq
	}
	is, isSE := posterior.LogMeanExp(lw)
	s, _ := DefaultSettings(SMC).withDefaults()
	s.Particles, s.Moves = 256, 1
	sym := f.Symmetries()
	s.Laplace = &LaplaceOptions{Axes: sym.Axes, Groups: sym.Groups, Key: f.ComponentKey, Signs: sym.Signs}
	o := posterior.Observation{Design: des, X: tg.x}
	const runs = 8
	var lz []float64
	for rr := range runs {
		res := laplaceModel(f, o, mask, [][]float64{theta}, s, rand.New(rand.NewPCG(12, uint64(rr))))
		lz = append(lz, res.LogEvidence)
	}
	m, sd := meanSD(lz)
	tol := 4*math.Hypot(isSE, sd/math.Sqrt(runs)) + 0.02
	t.Logf("log Z: Laplace SMC %.4f (sd %.4f over runs), plain IS over the 8 copies %.4f ± %.4f (ESS %.3f)", m, sd, is, isSE, posterior.ESS(lw))
	if math.Abs(m-is) > tol {
		t.Errorf("log Z %.4f, plain IS %.4f (tolerance %.4f)", m, is, tol)
	}
}

// TestFindModeStarts: a two-stick b3s-brain voxel (fibres 90° apart)
// whose best draw has both sticks on one fibre. The Newton steps from that
// draw alone stop well below the posterior's mode (their 8 steps do not
// get the second stick across); with two starts the search also runs from
// the second draw (both sticks near their fibres, lower density than the
// collapsed draw) and keeps the higher mode, at least as high as the
// density at the true parameters.
func TestFindModeStarts(t *testing.T) {
	f, err := family.Lookup("b3s-brain")
	if err != nil {
		t.Fatal(err)
	}
	des := fdmri.UKBDesign()
	lay := f.Layout()
	mask := []bool{true, true, true, false, true}
	r := rand.New(rand.NewPCG(7, 1))
	theta := make([]float64, lay.DMax) // every latent at its prior mean 0
	o1, o2 := lay.Blocks[1].Offset, lay.Blocks[2].Offset
	theta[o1], theta[o1+1] = family.HemisphereInv(math.Pi/4, 0)
	theta[o2], theta[o2+1] = family.HemisphereInv(math.Pi/4, math.Pi-0.01)
	tg := simulatedTarget(f, des, r, theta, mask)
	logp := func(th []float64) float64 {
		z := make([]float64, len(tg.idx))
		for a, q := range tg.idx {
			z[a] = th[q]
		}
		return tg.logProb(z, nil)
	}
	collapsed := append([]float64(nil), theta...)
	collapsed[o2], collapsed[o2+1] = theta[o1], theta[o1]+0.01
	// The near draw: both directions off by δ, δ grown until its density
	// falls below the collapsed draw's (so that one start picks the latter).
	var near []float64
	for delta := 0.05; delta < 1.5; delta += 0.05 {
		near = append([]float64(nil), theta...)
		near[o1], near[o1+1] = family.HemisphereInv(math.Pi/4, delta)
		near[o2], near[o2+1] = family.HemisphereInv(math.Pi/4, math.Pi-0.01-delta)
		if logp(near) < logp(collapsed) {
			break
		}
	}
	if logp(near) >= logp(collapsed) {
		t.Fatalf("no near draw below the collapsed draw's density %.1f", logp(collapsed))
	}
	draws := [][]float64{near, collapsed}
	angle := func(z []float64) float64 {
		th := tg.theta(z)
		u := hemiDir(th[o1], th[o1+1])
		v := hemiDir(th[o2], th[o2+1])
		return math.Acos(math.Min(1, math.Abs(dot3(u, v)))) * 180 / math.Pi
	}
	zt := make([]float64, len(tg.idx))
	for a, q := range tg.idx {
		zt[a] = theta[q]
	}
	one, _ := findMode(tg, draws, 1, 0)
	two, _ := findMode(tg, draws, 2, 0)
	a1, a2 := angle(one), angle(two)
	l1, l2, lt := tg.logProb(one, nil), tg.logProb(two, nil), tg.logProb(zt, nil)
	t.Logf("one start: sticks %.1f° apart, log γ %.1f; two starts: %.1f°, log γ %.1f; truth log γ %.1f", a1, l1, a2, l2, lt)
	// A mode is at least as high as the truth's density; 5 nats is far
	// above the Newton tolerance (0.05) and the fixture's gap (≈ 38).
	if l2 < lt {
		t.Errorf("two starts: log γ %.2f below the truth's %.2f: not the mode", l2, lt)
	}
	if l1 > l2-5 {
		t.Errorf("one start reached log γ %.2f, two starts %.2f: the fixture no longer needs the second start", l1, l2)
	}
	if math.Abs(a2-90) > 10 {
		t.Errorf("two starts: sticks %.1f° apart, want 90° ± 10°", a2)
	}
}

// simulatedTarget simulates one observation of f's model mask at the
// latents theta on the design des and returns its posterior target.
func simulatedTarget(f family.Family, des family.Design, r *rand.Rand, theta []float64, mask []bool) *target {
	x := make([]float64, des.N)
	f.Simulate(r, des, theta, mask, x)
	act := make([]bool, f.Layout().DMax)
	f.Layout().Active(mask, act)
	return newTarget(f, des, x, mask, act)
}
