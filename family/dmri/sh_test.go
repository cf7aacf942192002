package dmri

import (
	"math"
	"testing"
)

// TestSHConvolution: the per-band SH convolution (SHConvolve of ODFSH
// coefficients with ZeppelinRotationalHarmonics) reproduces the exact
// dispersed signals — themselves equal to brute-force sphere quadrature to
// 1e−11 (TestConvolutionQuadrature) — for a Watson stick and a Bingham
// zeppelin at order L = 28, where the truncated bands carry < 1e−13 for
// these ODFs (κ ≤ 6.3) and kernels (b·d ≤ 4). Tolerance 1e−10 absolute,
// set by the 1e−11 accuracy of the ODF projection. The error at order
// 12 (paper: 13, reference: 14) is logged.
func TestSHConvolution(t *testing.T) {
	des := refDesign()
	exact := make([]float64, des.N)
	for _, tc := range []struct {
		c Compartment
		v map[string]float64
	}{
		{WatsonStick, map[string]float64{"d": 0.002, "theta": 0.7, "phi": -1.2, "odi": 0.1}},
		{BinghamZeppelin, map[string]float64{"d_par": 0.002, "d_perp": 0.0005, "theta": 1.2, "phi": 2.2, "odi": 0.3, "beta_frac": 0.6, "psi": 0.8}},
	} {
		f, m, theta := convModel(t, indexOf(tc.c), tc.v)
		f.Forward(des, theta, m, exact)
		for _, L := range []int{12, 28} {
			c := f.ODFSH(theta, m, L, ODFOptions{})
			y := make([]float64, NumSH(L))
			worst := 0.0
			for j := 0; j < des.N; j++ {
				r := des.Row(j)
				dperp := tc.v["d_perp"]
				dpar := tc.v["d"] + tc.v["d_par"]
				lam := ZeppelinRotationalHarmonics(L, r[0], dpar, dperp)
				got := SHConvolve(L, c, lam, [3]float64{r[1], r[2], r[3]}, y)
				worst = math.Max(worst, math.Abs(got-exact[j]))
			}
			if L == 28 && worst > 1e-10 {
				t.Errorf("%v: SH convolution at L=%d deviates by %.3g from the exact signal", tc.c, L, worst)
			}
			t.Logf("%v: largest |SH(L=%d) − exact| = %.3g", tc.c, L, worst)
		}
	}
}

// TestZeppelinRotationalHarmonics checks λ_l against closed forms:
// λ_0 = 2π∫e^{−at²}dt·e^{−bd⊥} = 2π√π erf(√a)/√a·e^{−bd⊥} and, for a = 0,
// λ_0 = 4πe^{−bd⊥} with all higher bands zero (orthogonality). 1e−14.
func TestZeppelinRotationalHarmonics(t *testing.T) {
	b, dpar, dperp := 3000.0, 0.0021, 0.0004
	a := b * (dpar - dperp)
	lam := ZeppelinRotationalHarmonics(8, b, dpar, dperp)
	want := 2 * math.Pi * math.Sqrt(math.Pi) * math.Erf(math.Sqrt(a)) / math.Sqrt(a) * math.Exp(-b*dperp)
	if math.Abs(lam[0]-want) > 1e-14*want {
		t.Errorf("λ_0 = %.16g, want %.16g", lam[0], want)
	}
	iso := ZeppelinRotationalHarmonics(8, b, dperp, dperp)
	if math.Abs(iso[0]-4*math.Pi*math.Exp(-b*dperp)) > 1e-14 {
		t.Errorf("isotropic λ_0 = %v", iso[0])
	}
	for l := 1; l < len(iso); l++ {
		if math.Abs(iso[l]) > 1e-14 {
			t.Errorf("isotropic λ_%d = %v, want 0", 2*l, iso[l])
		}
	}
}
