package dmrifit

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/prismsbi/prism/family"
	fdmri "github.com/prismsbi/prism/family/dmri"
	"github.com/prismsbi/prism/network"
	"github.com/prismsbi/prism/posterior"
	"github.com/prismsbi/prism/train"
)

// synthDesign is 2 b0 volumes and two shells (b = 1000, 2500) of 20
// random directions each.
func synthDesign(r *rand.Rand) family.Design {
	d := family.Design{CovDim: 4, Name: "synthetic"}
	add := func(b float64, g [3]float64) {
		d.Cov = append(d.Cov, b, g[0], g[1], g[2])
		d.N++
	}
	add(0, [3]float64{})
	add(0, [3]float64{})
	for _, b := range []float64{1000, 2500} {
		for range 20 {
			g := [3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
			n := math.Sqrt(g[0]*g[0] + g[1]*g[1] + g[2]*g[2])
			add(b, [3]float64{g[0] / n, g[1] / n, g[2] / n})
		}
	}
	return d
}

// tensorScan is a scan of nv voxels with the noise-free tensor signal
// exp(−b gᵀDg) of random positive-definite tensors (white-matter-like
// eigenvalues), plus Gaussian noise of standard deviation sigma.
func tensorScan(r *rand.Rand, nv int, sigma float64) *Scan {
	d := synthDesign(r)
	s := &Scan{Design: d, Nx: nv, Ny: 1, Nz: 1}
	for v := range nv {
		s.Voxels = append(s.Voxels, v)
		// D = R diag(l) Rᵀ with a random rotation R.
		q := mat.NewDense(3, 3, nil)
		for i := range 3 {
			for j := range 3 {
				q.Set(i, j, r.NormFloat64())
			}
		}
		var qr mat.QR
		qr.Factorize(q)
		var R mat.Dense
		qr.QTo(&R)
		l := []float64{1.7e-3, 0.4e-3 + 0.3e-3*r.Float64(), 0.3e-3}
		var D [3][3]float64
		for i := range 3 {
			for j := range 3 {
				for k := range 3 {
					D[i][j] += R.At(i, k) * l[k] * R.At(j, k)
				}
			}
		}
		for j := range d.N {
			row := d.Row(j)
			g := [3]float64{row[1], row[2], row[3]}
			var qf float64
			for a := range 3 {
				for b := range 3 {
					qf += g[a] * D[a][b] * g[b]
				}
			}
			s.Signal = append(s.Signal, math.Exp(-row[0]*qf)+sigma*r.NormFloat64())
		}
	}
	return s
}

// TestHeldOutVolumes: b0 volumes are never held out; k volumes are evenly
// spread over the diffusion-weighted ones; k ≤ 0 gives all of them.
func TestHeldOutVolumes(t *testing.T) {
	d := synthDesign(rand.New(rand.NewPCG(1, 1)))
	all := HeldOutVolumes(d, 0)
	if len(all) != 40 || all[0] != 2 || all[39] != 41 {
		t.Fatalf("all held-out volumes %v, want 2…41", all)
	}
	if got := HeldOutVolumes(d, 4); !slices.Equal(got, []int{7, 17, 27, 37}) {
		t.Errorf("4 held-out volumes %v, want [7 17 27 37]", got)
	}
}

// TestTensorLOONoiseFree: for noise-free tensor voxels the tensor model
// predicts every held-out volume exactly (the 41 remaining volumes still
// determine the 7 unknowns): the LOOCV error is at the level of the
// least-squares solve's rounding (1e−12 of a signal ≤ 1; bound 1e−9).
func TestTensorLOONoiseFree(t *testing.T) {
	s := tensorScan(rand.New(rand.NewPCG(2, 2)), 5, 0)
	held := HeldOutVolumes(s.Design, 0)
	l, err := TensorLOO(context.Background(), s, held, 1)
	if err != nil {
		t.Fatal(err)
	}
	for v, e := range l.RMSE(s) {
		if !(e < 1e-9) {
			t.Errorf("voxel %d: LOOCV RMSE %g of noise-free tensor data, want ≈ 0", v, e)
		}
	}
}

// TestTensorLOOBruteForce: on noisy data, the OLS prediction of each
// held-out volume equals an independent brute-force refit: the log-linear
// least-squares problem without that row solved with gonum's QR
// (agreement to 1e−9 relative: both are backward-stable solves of a
// well-conditioned 41×7 problem).
func TestTensorLOOBruteForce(t *testing.T) {
	s := tensorScan(rand.New(rand.NewPCG(3, 3)), 3, 0.01)
	held := HeldOutVolumes(s.Design, 5)
	l, err := TensorLOO(context.Background(), s, held, 0)
	if err != nil {
		t.Fatal(err)
	}
	N := s.Design.N
	for v := range s.Voxels {
		for h, j := range held {
			X := mat.NewDense(N-1, 7, nil)
			y := mat.NewVecDense(N-1, nil)
			r := 0
			for k := range N {
				if k == j {
					continue
				}
				row := s.Design.Row(k)
				b, g := row[0], row[1:4]
				X.SetRow(r, []float64{-b * g[0] * g[0], -b * g[1] * g[1], -b * g[2] * g[2], -2 * b * g[0] * g[1], -2 * b * g[0] * g[2], -2 * b * g[1] * g[2], 1})
				y.SetVec(r, math.Log(s.Signal[v*N+k]))
				r++
			}
			var beta mat.VecDense
			if err := beta.SolveVec(X, y); err != nil {
				t.Fatal(err)
			}
			row := s.Design.Row(j)
			b, g := row[0], row[1:4]
			x := []float64{-b * g[0] * g[0], -b * g[1] * g[1], -b * g[2] * g[2], -2 * b * g[0] * g[1], -2 * b * g[0] * g[2], -2 * b * g[1] * g[2], 1}
			var lp float64
			for k := range x {
				lp += x[k] * beta.AtVec(k)
			}
			want := math.Exp(lp)
			if got := l.Pred[v*len(held)+h]; math.Abs(got-want) > 1e-9*want {
				t.Errorf("voxel %d, volume %d: LOO prediction %v, brute-force refit %v", v, j, got, want)
			}
		}
	}
	// And the noise now shows: the error is of the order of σ = 0.01.
	for v, e := range l.RMSE(s) {
		// Log-linear OLS weights the noisy low signals of the b = 2500
		// shell as much as the others, so the prediction error can exceed σ.
		if !(e > 0.003 && e < 0.1) {
			t.Errorf("voxel %d: LOOCV RMSE %v with noise σ = 0.01", v, e)
		}
	}
}

// TestNetworkLOO: the network's LOO prediction of voxel v and volume j is
// the mean, over joint samples from the posterior given the scan without
// volume j, of the family's signal at volume j — checked against a
// direct posterior call for one voxel with the same streams; results do
// not depend on the batch size.
func TestNetworkLOO(t *testing.T) {
	s := tensorScan(rand.New(rand.NewPCG(4, 4)), 7, 0.02)
	cfg, err := train.LoadConfig("../configs/b3s.yaml", "b3s")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Network.ModelDim, cfg.Network.EncoderLayers, cfg.Network.MaskLayers, cfg.Network.ParamLayers = 16, 1, 1, 1
	cfg.Network.Heads, cfg.Network.HeadDim = 2, 8
	fam := fdmri.B3S()
	net, err := network.New(fam, cfg.Network, 1)
	if err != nil {
		t.Fatal(err)
	}
	p := posterior.New(net)
	held := HeldOutVolumes(s.Design, 3)
	set := NetworkLOOSettings{Lambda: 0.3, Samples: 64, Steps: 2, Solver: "ab2", Seed: 5, BatchSize: 3} // packs of 4 voxels: batches 4 and 8
	a, err := NetworkLOO(context.Background(), p, s, held, set, nil)
	if err != nil {
		t.Fatal(err)
	}
	set.BatchSize = 7
	b, err := NetworkLOO(context.Background(), p, s, held, set, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Voxel streams depend on the position (Offset), not on the batch.
	if !slices.Equal(a.Pred, b.Pred) {
		t.Errorf("LOO predictions depend on the batch size")
	}
	// Direct: voxel 0 (offset 0), the second held-out volume, in the mask
	// sampler's pack of voxels 0–3.
	N, j := s.Design.N, held[1]
	d := dropVolume(s.Design, j)
	if d.N != N-1 || d.Row(j)[0] != s.Design.Row(j + 1)[0] {
		t.Fatalf("dropVolume: %d measurements, row %d = %v", d.N, j, d.Row(j))
	}
	var obs []posterior.Observation
	for v := range 4 {
		obs = append(obs, posterior.Observation{Design: d, X: dropValue(nil, s.Signal[v*N:(v+1)*N], j)})
	}
	opt := posterior.Options{Seed: set.Seed ^ (uint64(j+1) << 40)}
	masks, err := p.SampleMasksSupported(obs, set.Lambda, set.Samples, opt)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := p.SampleTheta(obs, masks, posterior.SampleOptions{Options: opt, Steps: set.Steps})
	if err != nil {
		t.Fatal(err)
	}
	pred := make([]float64, N)
	var want float64
	for k := range set.Samples {
		fam.Forward(s.Design, ts[0].Theta[k], masks[0][k], pred)
		want += pred[j] / float64(set.Samples)
	}
	if got := a.Pred[1]; math.Abs(got-want) > 1e-12 {
		t.Errorf("LOO prediction %v, direct %v", got, want)
	}
	for _, e := range a.RMSE(s) {
		if !(e >= 0 && e < 2) {
			t.Errorf("network LOOCV RMSE %v", e)
		}
	}
}

// TestSummariseLOO: medians and means over all and over white-matter
// voxels, NaN errors left out.
func TestSummariseLOO(t *testing.T) {
	s := SummariseLOO("x", []float64{1, 2, math.NaN(), 4, 10}, []bool{true, false, true, true, true})
	if s.Voxels != 4 || s.Median != 3 || s.Mean != 4.25 || s.WMVoxels != 3 || s.WMMedian != 4 || s.WMMean != 5 {
		t.Errorf("summary %+v", s)
	}
}

// TestCorrectedLOO: with --correct smc and the true class among the
// candidates (--correct-always 2 holds Ball+Stick), the held-out
// prediction is the exact posterior predictive, whatever the (untrained)
// network says: on Ball+Stick phantom voxels at SNR 100 on 42 volumes,
// the posterior's spread at a held-out volume is far below the noise σ =
// 0.01, so each voxel's LOOCV RMSE over its 2 held-out volumes is about σ;
// the bound 3σ fails by chance with probability P(χ²₂ > 18) = e⁻⁹ per
// voxel. The predictions do not depend on the batch size (every voxel's
// streams depend on its position and the held-out volume only).
func TestCorrectedLOO(t *testing.T) {
	d := synthDesign(rand.New(rand.NewPCG(9, 9)))
	const nv, sigma = 2, 0.01
	x, err := PhantomVoxels("Ball+Stick", d, nv, 1/sigma, 3)
	if err != nil {
		t.Fatal(err)
	}
	s := &Scan{Design: d, Nx: nv, Ny: 1, Nz: 1, Voxels: []int{0, 1}, Signal: x}
	post := posterior.New(smallBSZT(t))
	held := HeldOutVolumes(d, 2)
	set := NetworkLOOSettings{Lambda: 0.3, Samples: 8, Steps: 2, Solver: "ab2", Seed: 5, BatchSize: 2,
		Correct: "smc", CorrectParticles: 16, CorrectAlways: 2}
	a, err := NetworkLOO(context.Background(), post, s, held, set, nil)
	if err != nil {
		t.Fatal(err)
	}
	for v, e := range a.RMSE(s) {
		t.Logf("voxel %d: corrected LOOCV RMSE %.4f", v, e)
		if !(e < 3*sigma) {
			t.Errorf("voxel %d: corrected LOOCV RMSE %v, want < 3σ = %v", v, e, 3*sigma)
		}
	}
	set.BatchSize = 1
	b, err := NetworkLOO(context.Background(), post, s, held, set, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Pred, b.Pred) {
		t.Errorf("corrected LOO predictions depend on the batch size: %v and %v", a.Pred, b.Pred)
	}
}
