package dmri

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prismsbi/prism/family"
	"gonum.org/v1/gonum/integrate/quad"
)

// TestRealSHOrthonormal integrates Y_j·Y_k over the sphere with a product
// rule (40-point Gauss–Legendre in cos θ, 80 uniform azimuths), exact for
// polynomials of degree ≤ 79 in cos θ and trigonometric degree < 80 in φ,
// so for all products up to L = 16. Tolerance 1e−13.
func TestRealSHOrthonormal(t *testing.T) {
	const L = 16
	nsh := NumSH(L)
	gram := make([]float64, nsh*nsh)
	xs, ws := make([]float64, 40), make([]float64, 40)
	quad.Legendre{}.FixedLocations(xs, ws, -1, 1)
	y := make([]float64, nsh)
	for i, ct := range xs {
		st := math.Sqrt(1 - ct*ct)
		for a := 0; a < 80; a++ {
			ph := 2 * math.Pi * float64(a) / 80
			RealSH(L, [3]float64{st * math.Cos(ph), st * math.Sin(ph), ct}, y)
			w := ws[i] * 2 * math.Pi / 80
			for j := 0; j < nsh; j++ {
				for k := 0; k < nsh; k++ {
					gram[j*nsh+k] += w * y[j] * y[k]
				}
			}
		}
	}
	for j := 0; j < nsh; j++ {
		for k := 0; k < nsh; k++ {
			if want := b2f(j == k); math.Abs(gram[j*nsh+k]-want) > 1e-13 {
				t.Fatalf("⟨Y_%d, Y_%d⟩ = %v, want %v", j, k, gram[j*nsh+k], want)
			}
		}
	}
	// Y_00 = 1/√(4π) and Y_20 = √(5/(16π))(3cos²θ − 1).
	RealSH(2, [3]float64{0.6, 0, 0.8}, y[:6])
	if math.Abs(y[0]-1/math.Sqrt(4*math.Pi)) > 1e-16 || math.Abs(y[3]-math.Sqrt(5/(16*math.Pi))*(3*0.64-1)) > 1e-15 {
		t.Errorf("Y_00 = %v, Y_20 = %v", y[0], y[3])
	}
}

// TestODFNormalised: the SH projection's c_00·√(4π) is the integral of the
// ODF, which must equal the sum of the weights (1) for random bszt-conv
// samples with every compartment active (sticks, Aganj tensors and
// zeppelins, Watson and Bingham ODFs, isotropic parts). This checks the
// normalisers, the Aganj ODF and the graded projection together.
// Tolerance 1e−9: the graded rule resolves peaks down to width 2^{−24} in
// s; the sample's sharpest ODFs have κ ≲ 10⁴ here.
func TestODFNormalised(t *testing.T) {
	f := BSZTConv()
	r := rand.New(rand.NewPCG(21, 22))
	m := make([]bool, len(f.comps))
	for k := range m {
		m[k] = k <= f.nc
	}
	theta := make([]float64, f.layout.DMax)
	for trial := 0; trial < 3; trial++ {
		for i := range theta {
			theta[i] = math.Max(-3, math.Min(3, r.NormFloat64()))
		}
		for _, opt := range []ODFOptions{{}, {NoIsotropic: true}} {
			c := f.ODFSH(theta, m, 2, opt)
			if got := c[0] * math.Sqrt(4*math.Pi); math.Abs(got-1) > 1e-9 {
				t.Errorf("trial %d %+v: ODF integrates to %.12g, want 1", trial, opt, got)
			}
		}
	}
}

// TestWatsonODFSH compares the projected SH coefficients of a single
// Watson-stick sample with the Funk–Hecke form c_lm = λ_l Y_lm(μ),
// λ_l = 2π ∫_{−1}^{1} W(t) P_l(t) dt, computed in the test by graded
// 1-D quadrature. Tolerance 1e−11 absolute (coefficients are O(0.1–1)).
func TestWatsonODFSH(t *testing.T) {
	const L = 12
	th, ph := 1.1, 0.4
	for _, odi := range []float64{0.05, 0.3, 0.9} {
		f, m, theta := convModel(t, indexOf(WatsonStick), map[string]float64{"d": 0.002, "theta": th, "phi": ph, "odi": odi})
		c := f.ODFSH(theta, m, L, ODFOptions{})
		kappa := 1 / math.Tan(odi*math.Pi/2)
		lz := WatsonLogNormaliser(kappa)
		y := make([]float64, NumSH(L))
		RealSH(L, unit(th, ph), y)
		for l := 0; l <= L; l += 2 {
			lam := 2 * 2 * math.Pi * gradedToZero(func(s float64) float64 {
				t := 1 - s
				return math.Exp(kappa*t*t-lz) * legendreP(l, t)
			}, 1)
			base := l*(l-1)/2 + l
			for mm := -l; mm <= l; mm++ {
				want := lam * y[base+mm]
				if math.Abs(c[base+mm]-want) > 1e-11 {
					t.Errorf("ODI=%g: c_{%d,%d} = %.14g, Funk–Hecke %.14g", odi, l, mm, c[base+mm], want)
				}
			}
		}
	}
}

func legendreP(l int, x float64) float64 {
	p0, p1 := 1.0, x
	if l == 0 {
		return 1
	}
	for n := 1; n < l; n++ {
		p0, p1 = p1, ((2*float64(n)+1)*x*p1-float64(n)*p0)/float64(n+1)
	}
	return p1
}

// TestODFGridAndPosterior: a sample with a ball, a stick and a tensor
// gives a uniform part f_ball/(4π), a peak (stick axis, f_stick) and the
// Aganj density written out in the test (tolerance 1e−14 relative); local
// and global averages are means over the right samples.
func TestODFGridAndPosterior(t *testing.T) {
	f := BSZT()
	D := [3][3]float64{{2e-3, 3e-4, 0}, {3e-4, 1e-3, 1e-4}, {0, 1e-4, 5e-4}}
	p := family.Params{Components: map[int]map[string]float64{
		0:  {"d": 3e-3},
		1:  {"d": 2e-3, "theta": 0.3, "phi": 1},
		7:  {"Dxx": D[0][0], "Dxy": D[0][1], "Dxz": D[0][2], "Dyy": D[1][1], "Dyz": D[1][2], "Dzz": D[2][2]},
		10: {"snr": 20},
	}, Fractions: []float64{0.2, 0.3, 0, 0, 0, 0, 0, 0.5, 0, 0}}
	m := mask("110000010010")
	theta, err := f.Latent(p, m)
	if err != nil {
		t.Fatal(err)
	}
	dirs := SphereGrid(50)
	out := make([]float64, len(dirs))
	peaks := f.ODF(theta, m, dirs, ODFOptions{}, out)
	if len(peaks) != 1 || math.Abs(peaks[0].Weight-0.3) > 1e-12 || math.Abs(dot(peaks[0].Dir, unit(0.3, 1))-1) > 1e-12 {
		t.Errorf("peaks = %+v", peaks)
	}
	Dinv, sdet := inverse3(D)
	for j, n := range dirs {
		q := quadForm(n, Dinv)
		want := 0.2/(4*math.Pi) + 0.5/(4*math.Pi*sdet*math.Pow(q, 1.5))
		if math.Abs(out[j]-want) > 1e-14*want {
			t.Errorf("direction %d: ODF %.16g, want %.16g", j, out[j], want)
		}
	}
	// NoIsotropic: the ball is dropped, the rest renormalised by 0.8.
	out2 := make([]float64, len(dirs))
	peaks = f.ODF(theta, m, dirs, ODFOptions{NoIsotropic: true}, out2)
	if math.Abs(peaks[0].Weight-0.3/0.8) > 1e-12 || math.Abs(out2[0]-(out[0]-0.2/(4*math.Pi))/0.8) > 1e-14 {
		t.Errorf("NoIsotropic: peak %v, density %v", peaks[0].Weight, out2[0])
	}
	// Posterior averages: two samples of one model, one of another.
	m2 := mask("100000000010")
	th2, err := f.Latent(family.Params{Components: map[int]map[string]float64{0: {"d": 1e-3}, 10: {"snr": 20}}}, m2)
	if err != nil {
		t.Fatal(err)
	}
	samples := []ODFSample{{theta, m}, {theta, m}, {th2, m2}}
	g, local := f.PosteriorODF(samples, dirs, ODFOptions{})
	if g.N != 3 || len(local) != 2 || local[family.MaskString(m)].N != 2 {
		t.Fatalf("global N=%d, %d local models", g.N, len(local))
	}
	iso := 1 / (4 * math.Pi)
	for j := range dirs {
		if math.Abs(g.Density[j]-(2*out[j]+iso)/3) > 1e-15 || math.Abs(local[family.MaskString(m)].Density[j]-out[j]) > 1e-15 {
			t.Fatalf("direction %d: global %v local %v", j, g.Density[j], local[family.MaskString(m)].Density[j])
		}
	}
	if len(g.Peaks) != 2 || math.Abs(g.Peaks[0].Weight-0.1) > 1e-12 {
		t.Errorf("global peaks %+v", g.Peaks)
	}
	gs, ls := f.PosteriorODFSH(samples, 4, ODFOptions{})
	if math.Abs(gs[0]*math.Sqrt(4*math.Pi)-1) > 1e-9 || math.Abs(ls[family.MaskString(m2)][0]*math.Sqrt(4*math.Pi)-1) > 1e-14 {
		t.Errorf("SH posterior ODF c00: global %v, local %v", gs[0], ls[family.MaskString(m2)][0])
	}
}
