package dmri

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prismsbi/prism/family"
)

// TestBallSticksFastMatchesGeneric compares the specialised ball-and-sticks
// likelihood and its gradient with the generic one (itself checked against finite
// differences in likelihood_test.go) on b3s and b3s-brain, every mask with
// a noise model, random latents and both a shell-ordered (UKB-like) and a
// random design with more than ballShells distinct b-values. The two sum
// the same terms in a different order, so they agree to rounding: relative
// 1e−10.
func TestBallSticksFastMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	rnd := family.Design{N: 60, CovDim: 4, Cov: make([]float64, 240)}
	for j := range rnd.N {
		g := [3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		n := math.Sqrt(dot(g, g))
		rnd.Cov[4*j] = 3000 * r.Float64() // all distinct b-values
		rnd.Cov[4*j+1], rnd.Cov[4*j+2], rnd.Cov[4*j+3] = g[0]/n, g[1]/n, g[2]/n
	}
	for _, name := range []string{"b3s", "b3s-brain"} {
		f, err := family.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		m := f.(*Model)
		if !m.ballSticks {
			t.Fatalf("%s: not recognised as ball and sticks", name)
		}
		for _, des := range []family.Design{UKBDesign(), rnd} {
			checked := 0
			for bits := 1; bits < 1<<len(m.comps); bits++ {
				mask := make([]bool, len(m.comps))
				for k := range mask {
					mask[k] = bits&(1<<k) != 0
				}
				if !mask[len(mask)-1] || !mask[0] {
					continue // a noise model and the ball
				}
				for range 5 {
					theta := make([]float64, m.layout.DMax)
					for i := range theta {
						theta[i] = r.NormFloat64()
					}
					x := make([]float64, des.N)
					m.Simulate(r, des, theta, mask, x)
					g1, g2 := make([]float64, len(theta)), make([]float64, len(theta))
					var st state
					m.decode(theta, mask, &st)
					l1 := m.logLikGrad(des, x, theta, mask, &st, false, g1)
					l2 := m.LogLikelihood(des, x, theta, mask, g2)
					if l0, l3 := m.logLik(des, x, &st, false), m.LogLikelihood(des, x, theta, mask, nil); math.Abs(l0-l3) > 1e-10*math.Abs(l0) {
						t.Fatalf("%s mask %v: log-likelihood without gradient %v (generic) vs %v", name, mask, l0, l3)
					}
					if math.Abs(l1-l2) > 1e-10*math.Abs(l1) {
						t.Fatalf("%s mask %v: log-likelihood %v (generic) vs %v", name, mask, l1, l2)
					}
					for i := range g1 {
						if math.Abs(g1[i]-g2[i]) > 1e-10*(1+math.Abs(g1[i])) {
							t.Fatalf("%s mask %v: ∂/∂θ%d %v (generic) vs %v", name, mask, i, g1[i], g2[i])
						}
					}
					checked++
				}
			}
			if checked == 0 {
				t.Fatalf("%s: no mask checked", name)
			}
		}
	}
}

// BenchmarkLogLikelihoodGradB3SBrain is one likelihood-and-gradient call of
// b3s-brain with two sticks on the UKB-like table (105 measurements);
// ...Generic is the same call through the generic path.
func BenchmarkLogLikelihoodGradB3SBrain(b *testing.B) { benchBallSticks(b, true) }

func BenchmarkLogLikelihoodGradB3SBrainGeneric(b *testing.B) { benchBallSticks(b, false) }

func benchBallSticks(b *testing.B, fast bool) {
	f, err := family.Lookup("b3s-brain")
	if err != nil {
		b.Fatal(err)
	}
	m := f.(*Model)
	des := UKBDesign()
	mask := []bool{true, true, true, false, true}
	r := rand.New(rand.NewPCG(1, 1))
	theta := make([]float64, m.layout.DMax)
	for i := range theta {
		theta[i] = r.NormFloat64()
	}
	x := make([]float64, des.N)
	m.Simulate(r, des, theta, mask, x)
	grad := make([]float64, m.layout.DMax)
	b.ReportAllocs()
	for b.Loop() {
		if fast {
			m.LogLikelihood(des, x, theta, mask, grad)
		} else {
			var st state
			m.decode(theta, mask, &st)
			m.logLikGrad(des, x, theta, mask, &st, false, grad)
		}
	}
}
