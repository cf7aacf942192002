package mcmc

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/family/dmri"
)

// truth is a synthetic ball-and-sticks voxel.
type truth struct {
	S0, D, DStd float64
	F           []float64
	Dir         [][3]float64
}

// signal is the model written out independently of the sampler:
// S0·[(1−Σf)(1+b s²/d)^−(d/s)² + Σ f_i (1+b (g·n_i)² s²/d)^−(d/s)²].
func (tr truth) signal(d family.Design) []float64 {
	out := make([]float64, d.N)
	k := tr.D * tr.D / (tr.DStd * tr.DStd)
	for j := range out {
		r := d.Row(j)
		fiso := 1.0
		for _, f := range tr.F {
			fiso -= f
		}
		v := fiso * math.Pow(1+r[0]*tr.DStd*tr.DStd/tr.D, -k)
		for i, f := range tr.F {
			c := r[1]*tr.Dir[i][0] + r[2]*tr.Dir[i][1] + r[3]*tr.Dir[i][2]
			v += f * math.Pow(1+r[0]*c*c*tr.DStd*tr.DStd/tr.D, -k)
		}
		out[j] = tr.S0 * v
	}
	return out
}

func (tr truth) noisy(d family.Design, snr float64, r *rand.Rand) []float64 {
	y := tr.signal(d)
	for j := range y {
		y[j] += tr.S0 / snr * r.NormFloat64()
	}
	return y
}

func unitVec(th, ph float64) [3]float64 { return direction(th, ph) }

// TestSignalMatchesB3S: the sampler's model signal equals the b3s
// family's forward model for the same parameters (1e−13: both evaluate
// dmri.GammaSignal; b3s goes through a fraction stick-breaking round trip,
// ~1e−15) and the closed form above (1e−13: pow vs exp·log1p rounding).
func TestSignalMatchesB3S(t *testing.T) {
	des := dmri.HCPDesign()
	s := DefaultSettings()
	sm, err := NewSampler(des, s)
	if err != nil {
		t.Fatal(err)
	}
	tr := truth{S0: 1.3, D: 1.7e-3, DStd: 0.6e-3, F: []float64{0.3, 0.2, 0.1},
		Dir: [][3]float64{unitVec(0.3, 1.2), unitVec(1.4, -2.5), unitVec(0.9, 0.4)}}
	sm.x[pS0], sm.x[pD], sm.x[pDStd] = tr.S0, tr.D, tr.DStd
	th := [][2]float64{{0.3, 1.2}, {1.4, -2.5}, {0.9, 0.4}}
	for i := range 3 {
		sm.x[pFibre+3*i], sm.x[pFibre+3*i+1], sm.x[pFibre+3*i+2] = tr.F[i], th[i][0], th[i][1]
	}
	copy(sm.y, tr.signal(des))
	if err := sm.refresh(); err != nil {
		t.Fatal(err)
	}
	f := dmri.B3S()
	mask := []bool{true, true, true, true, true}
	theta, err := f.Latent(family.Params{
		Components: map[int]map[string]float64{
			1: {"theta": th[0][0], "phi": th[0][1]},
			2: {"theta": th[1][0], "phi": th[1][1]},
			3: {"theta": th[2][0], "phi": th[2][1]},
			4: {"snr": 30},
		},
		Shared:    map[string]float64{"d": tr.D, "d_std": tr.DStd},
		Fractions: []float64{0.4, 0.3, 0.2, 0.1},
	}, mask)
	if err != nil {
		t.Fatal(err)
	}
	fwd := make([]float64, des.N)
	f.Forward(des, theta, mask, fwd)
	for j := range fwd {
		if got := tr.S0 * sm.mix[j]; math.Abs(got-tr.S0*fwd[j]) > 1e-13 || math.Abs(got-sm.y[j]) > 1e-13 {
			t.Fatalf("measurement %d: sampler %.16g, b3s %.16g, closed form %.16g", j, got, tr.S0*fwd[j], sm.y[j])
		}
	}
	if sm.ssr > 1e-24 {
		t.Fatalf("SSR at the truth of noise-free data = %g, want ~0", sm.ssr)
	}
}

// TestFitTensorExact: on noise-free mono-exponential tensor data the
// log-linear least-squares fit is exact (up to rounding, 1e−12 relative on
// the eigenvalues, 1e−9 on the eigenvector components).
func TestFitTensorExact(t *testing.T) {
	des := dmri.UKBDesign()
	R := rotation(0.4, -0.7, 1.1)
	evals := [3]float64{1.7e-3, 0.5e-3, 0.3e-3}
	var D [3][3]float64
	for a := range 3 {
		for b := range 3 {
			for k := range 3 {
				D[a][b] += R[a][k] * evals[k] * R[b][k]
			}
		}
	}
	b := make([]float64, des.N)
	g := make([][3]float64, des.N)
	y := make([]float64, des.N)
	for j := range y {
		r := des.Row(j)
		b[j], g[j] = r[0], [3]float64{r[1], r[2], r[3]}
		y[j] = 800 * dmri.TensorSignal(b[j], g[j], D)
	}
	ten, ok := FitTensor(b, g, y)
	if !ok {
		t.Fatal("fit failed")
	}
	if math.Abs(ten.S0-800) > 1e-9 {
		t.Errorf("S0 = %v, want 800", ten.S0)
	}
	for k := range 3 {
		if math.Abs(ten.Eval[k]-evals[k]) > 1e-12*evals[0] {
			t.Errorf("eigenvalue %d = %.15g, want %.15g", k, ten.Eval[k], evals[k])
		}
		dot := 0.0
		for a := range 3 {
			dot += ten.Evec[k][a] * R[a][k]
		}
		if math.Abs(math.Abs(dot)-1) > 1e-9 {
			t.Errorf("eigenvector %d: |cos| = %v, want 1", k, math.Abs(dot))
		}
	}
	wantFA := math.Sqrt(0.5) * math.Sqrt((1.2*1.2+0.2*0.2+1.4*1.4)/(1.7*1.7+0.5*0.5+0.3*0.3))
	if math.Abs(ten.FA()-wantFA) > 1e-9 {
		t.Errorf("FA = %v, want %v", ten.FA(), wantFA)
	}
	// Too few positive measurements: fallback, not a fit.
	if _, ok := FitTensor(b[:6], g[:6], y[:6]); ok {
		t.Error("FitTensor reported a fit from 6 measurements")
	}
}

// rotation returns Rz(a)·Ry(b)·Rz(c).
func rotation(a, b, c float64) [3][3]float64 {
	rz := func(t float64) *mat.Dense {
		s, co := math.Sincos(t)
		return mat.NewDense(3, 3, []float64{co, -s, 0, s, co, 0, 0, 0, 1})
	}
	s, co := math.Sincos(b)
	ry := mat.NewDense(3, 3, []float64{co, 0, s, 0, 1, 0, -s, 0, co})
	var m mat.Dense
	m.Mul(rz(a), ry)
	m.Mul(&m, rz(c))
	var out [3][3]float64
	for i := range 3 {
		for j := range 3 {
			out[i][j] = m.At(i, j)
		}
	}
	return out
}

func TestBadVoxels(t *testing.T) {
	des := dmri.UKBDesign()
	s := DefaultSettings()
	s.BurnIn, s.Jumps, s.SampleEvery = 10, 10, 5
	sm, err := NewSampler(des, s)
	if err != nil {
		t.Fatal(err)
	}
	c := NewChain(s)
	r := rand.New(rand.NewPCG(1, 2))
	y := make([]float64, des.N)
	if err := sm.Run(y, r, c); !errors.Is(err, ErrBadData) {
		t.Errorf("all-zero voxel: err = %v, want ErrBadData", err)
	}
	y[3] = math.NaN()
	if err := sm.Run(y, r, c); !errors.Is(err, ErrBadData) {
		t.Errorf("NaN voxel: err = %v, want ErrBadData", err)
	}
	if err := sm.Run(y[:5], r, c); err == nil {
		t.Error("short signal accepted")
	}
	other := s
	other.Fibres = 2
	if err := sm.Run(y, r, NewChain(other)); err == nil {
		t.Error("chain of other settings accepted")
	}
	bad := s
	bad.Fibres = 4
	if _, err := NewSampler(des, bad); err == nil {
		t.Error("4 fibres accepted")
	}
}
