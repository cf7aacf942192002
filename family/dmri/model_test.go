package dmri

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
)

// refDesign is the 14-volume scheme of the reference implementation's
// golden tests: 2 × b0 and the six directions
// x, y, z, (x+y)/√2, (x+z)/√2, (y+z)/√2 at b = 1000 and b = 2000.
func refDesign() family.Design {
	r := 1 / math.Sqrt2
	dirs := [][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {r, r, 0}, {r, 0, r}, {0, r, r}}
	cov := []float64{0, 1, 0, 0, 0, 1, 0, 0}
	for _, b := range []float64{1000, 2000} {
		for _, g := range dirs {
			cov = append(cov, b, g[0], g[1], g[2])
		}
	}
	return family.Design{N: 14, CovDim: 4, Cov: cov, Name: "ref14"}
}

func mask(bits string) []bool {
	m := make([]bool, len(bits))
	for i, c := range bits {
		m[i] = c == '1'
	}
	return m
}

func TestFamiliesRegistered(t *testing.T) {
	for _, tc := range []struct {
		name     string
		C, DMax  int
		noise    int
		shared   int
		simplex  int
		compName string
	}{
		{"b3s", 5, 12, 1, 2, 4, "MultiShellStick2"},
		{"bszt", 12, 51, 2, 0, 10, "Zeppelin2"},
		{"bszt-brain", 12, 51, 2, 0, 10, "Zeppelin2"},
		{"bszt-conv", 21, 114, 2, 0, 19, "NODDIBingham"},
	} {
		f, err := family.Lookup(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		l := f.Layout()
		comps := f.Components()
		if len(comps) != tc.C || l.DMax != tc.DMax || len(l.Shared) != tc.shared || len(l.Simplex) != tc.simplex {
			t.Errorf("%s: C=%d DMax=%d shared=%d simplex=%d, want %d %d %d %d",
				tc.name, len(comps), l.DMax, len(l.Shared), len(l.Simplex), tc.C, tc.DMax, tc.shared, tc.simplex)
		}
		noise := 0
		found := false
		for k, c := range comps {
			if c.Kind == family.Noise {
				noise++
				if k < len(comps)-tc.noise {
					t.Errorf("%s: noise component %d before a base component", tc.name, k)
				}
			}
			found = found || c.Name == tc.compName
		}
		if noise != tc.noise || !found {
			t.Errorf("%s: %d noise components (want %d), component %q present: %v", tc.name, noise, tc.noise, tc.compName, found)
		}
		if _, ok := f.(family.TableDesigner); !ok {
			t.Errorf("%s does not implement family.TableDesigner", tc.name)
		}
	}
	if a := B3S().Layout().Alpha; len(a) != 4 || a[0] != 3.5 || a[1] != 1 || a[2] != 0.3 || a[3] != 0.1 {
		t.Errorf("b3s Dirichlet α = %v", a)
	}
	p, ok := BSZT().MaskPrior().(family.DimPenalisedPrior)
	if !ok {
		t.Fatalf("bszt mask prior is %T", BSZT().MaskPrior())
	}
	if want := []int{1, 3, 3, 3, 4, 4, 4, 6, 6, 6}; len(p.Dims) != len(want) || p.NumNoise != 2 || p.P0 != 0.5 || p.LambdaMax != 4 {
		t.Errorf("bszt prior = %+v", p)
	} else {
		for i := range want {
			if p.Dims[i] != want[i] {
				t.Errorf("bszt prior dims = %v, want %v", p.Dims, want)
				break
			}
		}
	}
	if bp, ok := B3S().MaskPrior().(family.BernoulliPrior); !ok || bp.MinActive != 1 || bp.NumBase != 4 || bp.NumNoise != 1 {
		t.Errorf("b3s mask prior = %#v", B3S().MaskPrior())
	}
}

// TestForwardB3SClosedForm sets natural parameters through Latent and
// compares Forward with the mixture written out in the test with math.Pow:
// S = f0(1+b s²/d)^{−(d/s)²} + Σ_k f_k (1+b (g·n_k)² s²/d)^{−(d/s)²}.
// Tolerance 1e−13 absolute: the only differences are the stick-breaking
// round trip of the fractions (~1e−15) and rounding in pow vs exp·log1p.
func TestForwardB3SClosedForm(t *testing.T) {
	f := B3S()
	d, s := 1.7e-3, 0.6e-3
	fr := []float64{0.5, 0.3, 0, 0.2}
	dirs := [][2]float64{{0.3, 1.2}, {}, {1.4, -2.5}}
	p := family.Params{
		Components: map[int]map[string]float64{
			1: {"theta": dirs[0][0], "phi": dirs[0][1]},
			3: {"theta": dirs[2][0], "phi": dirs[2][1]},
			4: {"snr": 30},
		},
		Shared:    map[string]float64{"d": d, "d_std": s},
		Fractions: fr,
	}
	m := mask("11011")
	theta, err := f.Latent(p, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, des := range []family.Design{refDesign(), UKBDesign(), HCPDesign()} {
		out := make([]float64, des.N)
		f.Forward(des, theta, m, out)
		k := d * d / (s * s)
		for j := 0; j < des.N; j++ {
			r := des.Row(j)
			g := [3]float64{r[1], r[2], r[3]}
			want := fr[0] * math.Pow(1+r[0]*s*s/d, -k)
			for _, c := range []int{1, 3} {
				n := unit(dirs[c-1][0], dirs[c-1][1])
				gn := dot(g, n)
				want += fr[c] * math.Pow(1+r[0]*gn*gn*s*s/d, -k)
			}
			if math.Abs(out[j]-want) > 1e-13 {
				t.Errorf("%s: measurement %d: Forward %.16g, closed form %.16g", des.Name, j, out[j], want)
			}
		}
	}
}

// TestForwardBSZTClosedForm does the same for every BSZT compartment at
// once, with the closed forms written out independently in the test.
func TestForwardBSZTClosedForm(t *testing.T) {
	f := BSZT()
	fr := []float64{0.1, 0.15, 0.05, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1}
	D := [3][3][3]float64{
		{{1.2e-3, 0.1e-3, -0.2e-3}, {0.1e-3, 0.5e-3, 0.05e-3}, {-0.2e-3, 0.05e-3, 0.9e-3}},
		{{2e-3, 0, 0}, {0, 0.3e-3, 0}, {0, 0, 0.3e-3}},
		{{0.7e-3, 0.3e-3, 0.1e-3}, {0.3e-3, 0.8e-3, 0.2e-3}, {0.1e-3, 0.2e-3, 1.1e-3}},
	}
	comp := map[int]map[string]float64{
		0:  {"d": 3e-3},
		1:  {"d": 1.7e-3, "theta": 0.2, "phi": 0.4},
		2:  {"d": 2.2e-3, "theta": 1.0, "phi": -1.1},
		3:  {"d": 0.9e-3, "theta": 1.5, "phi": 3.0},
		4:  {"d_par": 2e-3, "d_perp": 0.5e-3, "theta": 0.7, "phi": 2.0},
		5:  {"d_par": 0.4e-3, "d_perp": 1.5e-3, "theta": 1.2, "phi": -0.3},
		6:  {"d_par": 1.1e-3, "d_perp": 1.1e-3, "theta": 0.1, "phi": -2.9},
		11: {"snr": 20},
	}
	for i := 0; i < 3; i++ {
		v := map[string]float64{}
		for q, n := range tensorNames {
			v[n] = D[i][tensorIndex[q][0]][tensorIndex[q][1]]
		}
		comp[7+i] = v
	}
	m := mask("111111111101")
	theta, err := f.Latent(family.Params{Components: comp, Fractions: fr}, m)
	if err != nil {
		t.Fatal(err)
	}
	des := HCPDesign()
	out := make([]float64, des.N)
	f.Forward(des, theta, m, out)
	for j := 0; j < des.N; j++ {
		r := des.Row(j)
		b, g := r[0], [3]float64{r[1], r[2], r[3]}
		want := fr[0] * math.Exp(-b*3e-3)
		for k := 1; k <= 3; k++ {
			c := comp[k]
			gn := dot(g, unit(c["theta"], c["phi"]))
			want += fr[k] * math.Exp(-b*c["d"]*gn*gn)
		}
		for k := 4; k <= 6; k++ {
			c := comp[k]
			gn := dot(g, unit(c["theta"], c["phi"]))
			want += fr[k] * math.Exp(-b*(c["d_par"]*gn*gn+c["d_perp"]*(1-gn*gn)))
		}
		for i := 0; i < 3; i++ {
			q := 0.0
			for a := 0; a < 3; a++ {
				for c := 0; c < 3; c++ {
					q += g[a] * D[i][a][c] * g[c]
				}
			}
			want += fr[7+i] * math.Exp(-b*q)
		}
		// The tensor latents go through a Cholesky factorisation and back
		// (relative error ~1e−15 of D), the fractions through stick
		// breaking (~1e−15): 1e−13 absolute covers both.
		if math.Abs(out[j]-want) > 1e-13 {
			t.Errorf("measurement %d (b=%v): Forward %.16g, closed form %.16g", j, b, out[j], want)
		}
	}
}

// TestInactiveCompartmentsIgnored puts NaN into every inactive latent: the
// forward model, simulation and likelihood must not see them.
func TestInactiveCompartmentsIgnored(t *testing.T) {
	for _, f := range []*Model{B3S(), BSZT(), BSZTBrain(), BSZTConv()} {
		r := rand.New(rand.NewPCG(1, 2))
		des := UKBDesign()
		theta := make([]float64, f.layout.DMax)
		active := make([]bool, f.layout.DMax)
		m := make([]bool, len(f.comps))
		for trial := 0; trial < 50; trial++ {
			f.MaskPrior().Sample(r, r.Float64(), m)
			f.layout.Active(m, active)
			for i := range theta {
				theta[i] = r.NormFloat64()
				if !active[i] {
					theta[i] = math.NaN()
				}
			}
			out := make([]float64, des.N)
			f.Forward(des, theta, m, out)
			f.Simulate(r, des, theta, m, out)
			grad := make([]float64, f.layout.DMax)
			ll := f.LogLikelihood(des, out, theta, m, grad)
			bad := math.IsNaN(ll) || math.IsInf(ll, 0)
			for i, g := range grad {
				bad = bad || math.IsNaN(g) || (!active[i] && g != 0)
			}
			for _, v := range out {
				bad = bad || math.IsNaN(v)
			}
			if bad {
				t.Fatalf("%s mask %s: NaN leaked from inactive latents (ll=%v, grad=%v)", f.Name(), family.MaskString(m), ll, grad)
			}
		}
	}
}

// TestNaturalLatentRoundTrip checks Natural∘Latent = id on natural
// parameters and Latent∘Natural = id on active latents, for random θ and
// masks from the prior. Tensors are compared as D (their Cholesky latents
// are only defined up to column signs). Tolerances: 1e−12 relative on
// natural values (Φ/Φ⁻¹ and the incomplete-beta pair are accurate to a few
// ulps in the bulk), 1e−7 absolute on latents (Φ⁻¹ amplifies rounding in
// the tails by 1/φ(z) ≤ 1e4 for |z| ≤ 4).
func TestNaturalLatentRoundTrip(t *testing.T) {
	for _, f := range []*Model{B3S(), BSZT(), BSZTConv()} {
		r := rand.New(rand.NewPCG(3, 4))
		theta := make([]float64, f.layout.DMax)
		active := make([]bool, f.layout.DMax)
		m := make([]bool, len(f.comps))
		for trial := 0; trial < 300; trial++ {
			f.MaskPrior().Sample(r, r.Float64(), m)
			f.layout.Active(m, active)
			for i := range theta {
				theta[i] = math.Max(-4, math.Min(4, r.NormFloat64()))
			}
			p := f.Natural(theta, m)
			back, err := f.Latent(p, m)
			if err != nil {
				t.Fatalf("%s %s: Latent(Natural(θ)): %v", f.Name(), family.MaskString(m), err)
			}
			p2 := f.Natural(back, m)
			if !paramsClose(p, p2, 1e-12) {
				t.Fatalf("%s %s: Natural∘Latent changed the parameters:\n%+v\n%+v", f.Name(), family.MaskString(m), p, p2)
			}
			for i := range theta {
				if !active[i] {
					if back[i] != 0 {
						t.Fatalf("%s: inactive latent %d = %v, want 0", f.Name(), i, back[i])
					}
					continue
				}
				if inTensor(f, i) {
					continue
				}
				if math.Abs(back[i]-theta[i]) > 1e-7 {
					t.Fatalf("%s %s: latent %d: %v → %v", f.Name(), family.MaskString(m), i, theta[i], back[i])
				}
			}
		}
	}
}

func inTensor(f *Model, i int) bool {
	for k, c := range f.spec.Compartments {
		b := f.layout.Blocks[k]
		if c == Tensor && i >= b.Offset && i < b.Offset+b.Size {
			return true
		}
	}
	return false
}

func paramsClose(a, b family.Params, tol float64) bool {
	close := func(x, y float64) bool {
		return math.Abs(x-y) <= tol*math.Max(1e-3, math.Max(math.Abs(x), math.Abs(y)))
	}
	if len(a.Fractions) != len(b.Fractions) || len(a.Components) != len(b.Components) || len(a.Shared) != len(b.Shared) {
		return false
	}
	for i := range a.Fractions {
		if math.Abs(a.Fractions[i]-b.Fractions[i]) > tol {
			return false
		}
	}
	for k, v := range a.Shared {
		if !close(v, b.Shared[k]) {
			return false
		}
	}
	for k, va := range a.Components {
		vb := b.Components[k]
		if len(va) != len(vb) {
			return false
		}
		for n, x := range va {
			// Diffusivities are ~1e−3: compare them on their own scale.
			if math.Abs(x-vb[n]) > tol*math.Max(math.Abs(x), 1e-12) && !close(x, vb[n]) {
				return false
			}
		}
	}
	return true
}

func TestLatentErrors(t *testing.T) {
	f := BSZT()
	ok := family.Params{Components: map[int]map[string]float64{1: {"d": 1e-3, "theta": 1, "phi": 0}, 10: {"snr": 10}}}
	m := mask("010000000010")
	if _, err := f.Latent(ok, m); err != nil {
		t.Fatalf("valid parameters rejected: %v", err)
	}
	cases := []struct {
		name string
		p    family.Params
		want string
	}{
		{"missing", family.Params{Components: map[int]map[string]float64{1: {"d": 1e-3, "theta": 1}, 10: {"snr": 10}}}, `missing parameter "phi"`},
		{"unknown", family.Params{Components: map[int]map[string]float64{1: {"d": 1e-3, "theta": 1, "phi": 0, "psi": 1}, 10: {"snr": 10}}}, `unknown parameter "psi"`},
		{"range", family.Params{Components: map[int]map[string]float64{1: {"d": 0.02, "theta": 1, "phi": 0}, 10: {"snr": 10}}}, "outside its prior support"},
		{"snr", family.Params{Components: map[int]map[string]float64{1: {"d": 1e-3, "theta": 1, "phi": 0}, 10: {"snr": 100}}}, "snr = 100"},
		{"inactive", family.Params{Components: map[int]map[string]float64{0: {"d": 1e-3}, 1: {"d": 1e-3, "theta": 1, "phi": 0}, 10: {"snr": 10}}}, "off in the mask"},
		{"fractions", family.Params{Components: ok.Components, Fractions: []float64{0, 0.5, 0, 0, 0, 0, 0, 0, 0, 0}}, "sum to 0.5"},
	}
	for _, c := range cases {
		if _, err := f.Latent(c.p, m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to mention %q", c.name, err, c.want)
		}
	}
	// A tensor with an eigenvalue below the 1e−4 floor has no latent.
	tm := mask("000000010010")
	tp := family.Params{Components: map[int]map[string]float64{
		7:  {"Dxx": 1e-3, "Dxy": 0, "Dxz": 0, "Dyy": 0.5e-4, "Dyz": 0, "Dzz": 1e-3},
		10: {"snr": 10}}}
	if _, err := f.Latent(tp, tm); err == nil || !strings.Contains(err.Error(), "not positive definite") {
		t.Errorf("non-PD tensor: error %v", err)
	}
	// A lower-hemisphere direction is replaced by its antipode.
	lp := family.Params{Components: map[int]map[string]float64{1: {"d": 1e-3, "theta": math.Pi - 0.4, "phi": 0.5}, 10: {"snr": 10}}}
	th, err := f.Latent(lp, m)
	if err != nil {
		t.Fatal(err)
	}
	got := f.Natural(th, m).Components[1]
	if math.Abs(got["theta"]-0.4) > 1e-12 || math.Abs(got["phi"]-(0.5-math.Pi)) > 1e-12 {
		t.Errorf("antipodal flip gave theta=%v phi=%v, want 0.4, %v", got["theta"], got["phi"], 0.5-math.Pi)
	}
}

// TestB3SBrainPrior checks b3s-brain's priors by simulation: with latent
// θ ~ N(0, I), the shared d and d_std must be uniform on their ranges and,
// with all four compartments on, every Dirichlet(1,1,1,1) fraction has
// mean 1/4 and P(f > 1/2) = (1/2)³ = 1/8. n = 20,000 draws: the standard
// error of a U(a, b) mean is (b−a)/√(12n) ≈ 0.002(b−a) and of a
// probability ≤ 0.0035, so 5 standard errors bound each check.
func TestB3SBrainPrior(t *testing.T) {
	f := B3SBrain()
	if f.Name() != "b3s-brain" {
		t.Fatalf("name %q", f.Name())
	}
	if _, err := family.Lookup("b3s-brain"); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	mask := []bool{true, true, true, true, true}
	theta := make([]float64, f.Layout().DMax)
	const n = 20000
	var dSum, sSum, fSum, fHalf float64
	dMin, dMax := math.Inf(1), math.Inf(-1)
	for range n {
		for j := range theta {
			theta[j] = r.NormFloat64()
		}
		p := f.Natural(theta, mask)
		d, s := p.Shared["d"], p.Shared["d_std"]
		dSum += d
		sSum += s
		dMin, dMax = math.Min(dMin, d), math.Max(dMax, d)
		fSum += p.Fractions[2]
		if p.Fractions[2] > 0.5 {
			fHalf++
		}
	}
	if dMin < 1e-4 || dMax > 3.5e-3 {
		t.Errorf("d outside [1e-4, 3.5e-3]: [%g, %g]", dMin, dMax)
	}
	check := func(name string, got, want, se float64) {
		if math.Abs(got-want) > 5*se {
			t.Errorf("%s = %g, want %g ± %g", name, got, want, 5*se)
		}
	}
	check("mean d", dSum/n, (1e-4+3.5e-3)/2, 3.4e-3/math.Sqrt(12*n))
	check("mean d_std", sSum/n, 1e-3, 2e-3/math.Sqrt(12*n))
	check("mean f2", fSum/n, 0.25, math.Sqrt(3.0/80/n)) // Beta(1, 3) variance 3/80
	check("P(f2 > 1/2)", fHalf/n, 0.125, math.Sqrt(0.125*0.875/n))
	// Latent inverts Natural with the new ranges.
	p := f.Natural(theta, mask)
	back, err := f.Latent(p, mask)
	if err != nil {
		t.Fatal(err)
	}
	if q := f.Natural(back, mask); math.Abs(q.Shared["d"]-p.Shared["d"]) > 1e-12 || math.Abs(q.Shared["d_std"]-p.Shared["d_std"]) > 1e-12 {
		t.Errorf("Latent/Natural round trip: %v vs %v", q.Shared, p.Shared)
	}
	if _, err := f.Latent(family.Params{Components: p.Components, Shared: map[string]float64{"d": 5e-3, "d_std": 1e-3}, Fractions: p.Fractions}, mask); err == nil {
		t.Error("Latent accepted d = 5e-3 outside b3s-brain's range")
	}
}

// TestBSZTBrainPrior checks bszt-brain's own-diffusivity prior: every
// ball, stick and zeppelin diffusivity of a prior draw is U(1e−4, 3.5e−3)
// (range, and mean within 5 standard errors of a uniform's), the tensors
// keep bszt's prior (identical natural values for the same latents), and
// Latent refuses a diffusivity outside the range.
func TestBSZTBrainPrior(t *testing.T) {
	f, paper := BSZTBrain(), BSZT()
	if _, err := family.Lookup("bszt-brain"); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	mask := make([]bool, len(f.comps))
	for i := range mask {
		mask[i] = i != len(mask)-1 // all compartments, Gaussian noise
	}
	theta := make([]float64, f.Layout().DMax)
	const n = 5000
	var sum float64
	var count int
	lo, hi := math.Inf(1), math.Inf(-1)
	for range n {
		for j := range theta {
			theta[j] = r.NormFloat64()
		}
		p, q := f.Natural(theta, mask), paper.Natural(theta, mask)
		for k, c := range f.spec.Compartments {
			for name, v := range p.Components[k] {
				switch {
				case c == Tensor:
					if v != q.Components[k][name] {
						t.Fatalf("tensor %d %s: %g, bszt gives %g for the same latents", k, name, v, q.Components[k][name])
					}
				case name == "d" || name == "d_par" || name == "d_perp":
					sum += v
					count++
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
			}
		}
	}
	if lo < 1e-4 || hi > 3.5e-3 {
		t.Errorf("diffusivities outside [1e-4, 3.5e-3]: [%g, %g]", lo, hi)
	}
	// Diffusivities of one draw are independent, so the mean's standard
	// error is the uniform's σ / √count.
	if mean, want, se := sum/float64(count), (1e-4+3.5e-3)/2, 3.4e-3/math.Sqrt(12*float64(count)); math.Abs(mean-want) > 5*se {
		t.Errorf("mean diffusivity %g, want %g ± %g", mean, want, 5*se)
	}
	p := f.Natural(theta, mask)
	p.Components[0]["d"] = 5e-3
	if _, err := f.Latent(p, mask); err == nil {
		t.Error("Latent accepted a ball d = 5e-3 outside bszt-brain's range")
	}
}
