package gradtable

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
)

// tableDesign builds a design from b-values and directions.
func tableDesign(b []float64, g [][3]float64) family.Design {
	d := family.Design{N: len(b), CovDim: 4, Cov: make([]float64, 4*len(b)), Name: "test"}
	for j := range b {
		d.Cov[4*j] = b[j]
		copy(d.Cov[4*j+1:4*j+4], g[j][:])
	}
	return d
}

// shellDesign is one b = 0 volume and n volumes at b along directions
// spread on the sphere (seeded), the layout of the bundled scan.
func shellDesign(b float64, n int) ([]float64, [][3]float64) {
	r := rand.New(rand.NewPCG(3, 4))
	bs := []float64{0}
	gs := [][3]float64{{0, 0, 0}}
	for range n {
		v := [3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		l := math.Sqrt(dot(v, v))
		bs = append(bs, b)
		gs = append(gs, [3]float64{v[0] / l, v[1] / l, v[2] / l})
	}
	return bs, gs
}

func TestCheckDesign(t *testing.T) {
	scale := func(b []float64, f float64) []float64 {
		o := make([]float64, len(b))
		for i := range b {
			o[i] = b[i] * f
		}
		return o
	}
	b, g := shellDesign(2500, 20)
	same := make([][3]float64, len(g))
	planar := make([][3]float64, len(g))
	for j := range g {
		same[j] = [3]float64{0, 0, 1}
		a := float64(j) * math.Pi / float64(len(g))
		planar[j] = [3]float64{math.Cos(a), math.Sin(a), 0}
	}
	// Six volumes along only five distinct axes (one repeated with the sign flipped).
	five := [][3]float64{{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {0.6, 0.8, 0}, {0, 0.6, 0.8}, {-1, 0, 0}}
	fiveB := []float64{0, 1000, 1000, 1000, 1000, 1000, 1000}
	zeroVec := append([][3]float64(nil), g...)
	zeroVec[5] = [3]float64{0, 0, 0}
	neg := append([]float64(nil), b...)
	neg[3] = -1000
	nan := append([]float64(nil), b...)
	nan[4] = math.NaN()
	for _, tc := range []struct {
		name          string
		b             []float64
		g             [][3]float64
		want          string // "" for no error
		uninformative bool
	}{
		{"single shell b=2500", b, g, "", false},
		{"UK Biobank table", nil, nil, "", false},
		{"all b = 0", scale(b, 0), g, "every volume is a b ≤ 50", true},
		{"b in ms/µm²", scale(b, 1e-3), g, "multiply them by 1000", true},
		{"b in s/m²", scale(b, 1e6), g, "divide them by 10⁶", true},
		{"largest b 100", scale(b, 0.04), g, "want one in [200, 50000]", true},
		{"one direction", b, same, "along 1 distinct axes", true},
		{"five axes", fiveB, five, "along 5 distinct axes", true},
		{"directions in a plane", b, planar, "do not spread over the sphere", true},
		{"too few weighted volumes", b[:5], g[:5], "4 diffusion-weighted", true},
		{"zero direction at b > 0", b, zeroVec, "measurement 6: b = 2500 s/mm² with direction [0 0 0]", false},
		{"negative b", neg, g, "measurement 4: b-value -1000", false},
		{"NaN b", nan, g, "measurement 5: b-value NaN", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The default: two shells of 50 directions, a UK-Biobank-like
			// table (the dMRI family's UKB design is tested in its package).
			b1, g1 := shellDesign(1000, 50)
			b2, g2 := shellDesign(2000, 50)
			d := tableDesign(append(b1, b2...), append(g1, g2...))
			if tc.b != nil {
				d = tableDesign(tc.b, tc.g)
			}
			err := CheckDesign(d)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if errors.Is(err, ErrUninformative) != tc.uninformative {
				t.Errorf("errors.Is(err, ErrUninformative) = %v, want %v", !tc.uninformative, tc.uninformative)
			}
		})
	}
}

// TestDyadicRatioRotationInvariant: σ₆/σ₁ of the dyadic matrix does not
// change when every direction is rotated (the √2 weights make the map an
// isometry), so the check does not depend on the scanner frame.
func TestDyadicRatioRotationInvariant(t *testing.T) {
	_, g := shellDesign(1000, 30)
	g = g[1:]
	c, s := math.Cos(0.7), math.Sin(0.7)
	rot := make([][3]float64, len(g))
	for i, v := range g {
		rot[i] = [3]float64{c*v[0] - s*v[1], s*v[0] + c*v[1], v[2]}
	}
	a, b := dyadicRatio(g), dyadicRatio(rot)
	// Singular values are computed to about 1e-15 relative; 1e-9 leaves
	// room for the rounding of the rotated directions.
	if math.Abs(a-b) > 1e-9 || a < 0.1 {
		t.Fatalf("ratio %v, rotated %v; want equal and > 0.1 for 30 random directions", a, b)
	}
}
