package dmrifit

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/dti"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
)

// Leave-one-volume-out cross-validation (`prism dmri loocv`, paper Fig.
// 5b): for every held-out diffusion-weighted volume j and voxel, a method
// is fitted to the other volumes and predicts the b0-normalised signal of
// volume j; the per-voxel LOOCV error is the RMSE of those predictions
// over the held-out volumes. b ≈ 0 volumes are never held out: they define
// the b0 normalisation of every volume (Scan), so holding one out would
// leak it into the data the method sees.

// HeldOutVolumes returns up to k diffusion-weighted volumes (b > BZero) of
// d, evenly spread over them in file order (all of them when k ≤ 0 or k ≥
// their number).
func HeldOutVolumes(d family.Design, k int) []int {
	var dw []int
	for j := range d.N {
		if d.Row(j)[0] > BZero {
			dw = append(dw, j)
		}
	}
	if k <= 0 || k >= len(dw) {
		return dw
	}
	out := make([]int, k)
	for i := range k {
		out[i] = dw[(2*i+1)*len(dw)/(2*k)]
	}
	return out
}

// dropVolume returns d without measurement j.
func dropVolume(d family.Design, j int) family.Design {
	cov := make([]float64, 0, (d.N-1)*d.CovDim)
	cov = append(cov, d.Cov[:j*d.CovDim]...)
	cov = append(cov, d.Cov[(j+1)*d.CovDim:]...)
	return family.Design{N: d.N - 1, CovDim: d.CovDim, Cov: cov, Name: d.Name}
}

// dropValue writes x without entry j into dst (len(x)−1) and returns it.
func dropValue(dst, x []float64, j int) []float64 {
	dst = append(dst[:0], x[:j]...)
	return append(dst, x[j+1:]...)
}

// LOO holds the leave-one-out predictions of one method: Pred[v*H+h] is
// the prediction of volume Held[h] of voxel v (NaN where the method could
// not fit the voxel without that volume).
type LOO struct {
	Method string
	Held   []int
	Pred   []float64
}

// RMSE returns the per-voxel LOOCV error of l on s: the RMSE over the
// held-out volumes of prediction − data (NaN predictions left out; NaN
// when none is left).
func (l *LOO) RMSE(s *Scan) []float64 {
	H, N := len(l.Held), s.Design.N
	out := make([]float64, len(s.Voxels))
	for v := range out {
		var ss float64
		n := 0
		for h, j := range l.Held {
			p := l.Pred[v*H+h]
			if math.IsNaN(p) {
				continue
			}
			d := p - s.Signal[v*N+j]
			ss += d * d
			n++
		}
		out[v] = math.NaN()
		if n > 0 {
			out[v] = math.Sqrt(ss / float64(n))
		}
	}
	return out
}

// TensorLOO predicts each held-out volume from a diffusion-tensor fit
// (package dti: OLS then wls WLS iterations) to the remaining volumes:
// Ŝ_j = S0 exp(−b_j g_jᵀ D g_j).
func TensorLOO(ctx context.Context, s *Scan, held []int, wls int) (*LOO, error) {
	N, H := s.Design.N, len(held)
	l := &LOO{Method: "dti", Held: held, Pred: make([]float64, len(s.Voxels)*H)}
	for h, j := range held {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, err := dti.NewFitter(dropVolume(s.Design, j), wls)
		if err != nil {
			return nil, fmt.Errorf("dmri: the tensor cannot be fitted without volume %d: %w", j, err)
		}
		r := s.Design.Row(j)
		b, g := r[0], [3]float64{r[1], r[2], r[3]}
		workers := min(runtime.GOMAXPROCS(0), len(s.Voxels))
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ws := f.NewWorkspace()
				x := make([]float64, 0, N-1)
				for v := w; v < len(s.Voxels); v += workers {
					x = dropValue(x, s.Signal[v*N:(v+1)*N], j)
					fit, err := f.FitVoxel(x, ws)
					if err != nil {
						l.Pred[v*H+h] = math.NaN()
						continue
					}
					D := fit.D // Dxx, Dyy, Dzz, Dxy, Dxz, Dyz
					q := D[0]*g[0]*g[0] + D[1]*g[1]*g[1] + D[2]*g[2]*g[2] + 2*(D[3]*g[0]*g[1]+D[4]*g[0]*g[2]+D[5]*g[1]*g[2])
					l.Pred[v*H+h] = fit.S0 * math.Exp(-b*q)
				}
			}()
		}
		wg.Wait()
	}
	return l, nil
}

// NetworkLOOSettings configure NetworkLOO.
type NetworkLOOSettings struct {
	Lambda  float64 `json:"lambda"`
	Samples int     `json:"samples"`
	Steps   int     `json:"steps"`
	Solver  string  `json:"solver"`
	Seed    uint64  `json:"seed"`
	// BatchSize is the number of voxels per network call (without a
	// correction rounded up to a multiple of ⌊256/Samples⌋); results do
	// not depend on it.
	BatchSize int `json:"batch_size"`
	// Correct ("" or "none": the network alone; "smc" or "is") is the
	// correction of a model-selection fit, with CorrectParticles,
	// CorrectAlways and CorrectLambda as in FitSettings: each held-out
	// prediction then averages joint samples of the corrected posterior
	// given the other volumes, drawn as `dmri fit --correct` draws them
	// (SelectFitter).
	Correct          string  `json:"correct,omitempty"`
	CorrectParticles int     `json:"correct_particles,omitempty"`
	CorrectAlways    int     `json:"correct_always,omitempty"`
	CorrectLambda    float64 `json:"correct_lambda,omitempty"`
}

// corrected reports whether set asks for a correction.
func (set NetworkLOOSettings) corrected() bool { return set.Correct != "" && set.Correct != "none" }

// DefaultNetworkLOOSettings: λ 0.3 and the ODE settings of `dmri fit`,
// 16 joint samples per voxel and held-out volume.
func DefaultNetworkLOOSettings() NetworkLOOSettings {
	d := DefaultFitSettings()
	return NetworkLOOSettings{Lambda: d.Lambda, Samples: 16, Steps: d.Steps, Solver: d.Solver, Seed: d.Seed, BatchSize: d.BatchSize}
}

// NetworkLOO predicts each held-out volume j by the network's
// model-averaged posterior predictive given the other volumes: joint
// samples M ~ q(M | x₋ⱼ, λ) (restricted to the prior's support), θ ~ q(θ |
// M, x₋ⱼ), and the mean over them of the family's noise-free signal at
// volume j. The network sees the design without volume j (the encoder
// takes any number of measurements). progress, if not nil, is called
// with the number of (volume, voxel) fits done out of len(held)·voxels.
func NetworkLOO(ctx context.Context, p *posterior.Posterior, s *Scan, held []int, set NetworkLOOSettings, progress func(done int)) (*LOO, error) {
	if !(set.Lambda > 0 && set.Lambda < 1) || set.Samples < 1 || set.Steps < 1 || set.BatchSize < 1 {
		return nil, fmt.Errorf("dmri: invalid LOOCV settings %+v", set)
	}
	solver, err := posterior.ParseSolver(set.Solver)
	if err != nil {
		return nil, fmt.Errorf("dmri: %w", err)
	}
	if set.corrected() {
		if err := set.checkCorrection(p.Family()); err != nil {
			return nil, err
		}
		return correctedLOO(ctx, p, s, held, set, progress)
	}
	f := p.Family()
	N, H, nv := s.Design.N, len(held), len(s.Voxels)
	l := &LOO{Method: "network", Held: held, Pred: make([]float64, nv*H)}
	// The mask sampler packs ⌊256/Samples⌋ observations into one stream,
	// aligned on multiples of that (posterior.SampleMasks): batches that are
	// multiples of it give every voxel the same draws whatever the batch size.
	per := max(1, 256/set.Samples)
	size := (set.BatchSize + per - 1) / per * per
	nb := (nv + size - 1) / size
	// Jobs: every batch of every held-out volume, volume by volume.
	err = parallelJobs(ctx, nb*H, func(i int) (int, error) {
		h, start := i/nb, i%nb*size
		j := held[h]
		n := min(size, nv-start)
		obs := heldOutObs(s, j, start, n)
		// Streams: per held-out volume and voxel position.
		opt := posterior.Options{Seed: set.Seed ^ (uint64(j+1) << 40), Offset: uint64(start)}
		err := func() error {
			masks, err := p.SampleMasksSupported(obs, set.Lambda, set.Samples, opt)
			if err != nil {
				return err
			}
			ts, err := p.SampleTheta(obs, masks, posterior.SampleOptions{Options: opt, Steps: set.Steps, Solver: solver})
			if err != nil {
				return err
			}
			pred := make([]float64, N)
			for v := range n {
				l.Pred[(start+v)*H+h] = meanAt(f, s.Design, masks[v], ts[v].Theta, j, pred)
			}
			return nil
		}()
		if err != nil {
			return n, fmt.Errorf("dmri: LOOCV without volume %d: %w", j, err)
		}
		return n, nil
	}, progress)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// fitSettings returns the settings of the model-selection fit that
// correctedLOO runs for held-out volume j.
func (set NetworkLOOSettings) fitSettings(j int) FitSettings {
	fs := DefaultFitSettings()
	fs.Lambda, fs.Samples, fs.Steps, fs.Solver = set.Lambda, set.Samples, set.Steps, set.Solver
	fs.Seed, fs.BatchSize = set.Seed^(uint64(j+1)<<40), set.BatchSize
	fs.Correct, fs.CorrectParticles, fs.CorrectAlways, fs.CorrectLambda = set.Correct, set.CorrectParticles, set.CorrectAlways, set.CorrectLambda
	return fs
}

// checkCorrection checks that a corrected LOOCV can run with a network
// of family f: a known method (not "auto"), valid settings, and a
// model-selection family (the correction of ball-and-sticks fits is the
// Fitter's, which LOOCV does not run).
func (set NetworkLOOSettings) checkCorrection(f family.Family) error {
	if _, err := correct.ParseMethod(set.Correct); err != nil {
		return fmt.Errorf("dmri: LOOCV --correct: %w", err)
	}
	if err := set.fitSettings(0).Validate(); err != nil {
		return err
	}
	if BallAndSticks(f) {
		return fmt.Errorf("dmri: LOOCV --correct runs the model-selection correction; %s is a ball-and-sticks family, cross-validate it without --correct", f.Name())
	}
	return nil
}

// correctedLOO is NetworkLOO with a correction: per held-out volume j, a
// model-selection fit (SelectFitter, seed set.Seed ^ (j+1)<<40) of the
// scan without volume j draws set.Samples joint samples per voxel from the
// corrected posterior, and their mean noise-free signal at volume j is
// the prediction.
func correctedLOO(ctx context.Context, p *posterior.Posterior, s *Scan, held []int, set NetworkLOOSettings, progress func(done int)) (*LOO, error) {
	f := p.Family()
	N, H, nv := s.Design.N, len(held), len(s.Voxels)
	fits := make([]*SelectFitter, H)
	for h, j := range held {
		ft, err := NewSelectFitter(p, set.fitSettings(j))
		if err != nil {
			return nil, err
		}
		fits[h] = ft
	}
	l := &LOO{Method: "network", Held: held, Pred: make([]float64, nv*H)}
	size := set.BatchSize
	nb := (nv + size - 1) / size
	err := parallelJobs(ctx, nb*H, func(i int) (int, error) {
		h, start := i/nb, i%nb*size
		j := held[h]
		n := min(size, nv-start)
		obs := heldOutObs(s, j, start, n)
		// The batch's maps (model posterior, diagnostics) are not kept:
		// a selection of the batch's n voxels only, at index 0.
		sel := fits[h].newSelection(n, 0)
		masks, ts, err := fits[h].jointSamples(obs, s.Voxels[start:start+n], start, 0, sel)
		if err != nil {
			return n, fmt.Errorf("dmri: LOOCV without volume %d: %w", j, err)
		}
		pred := make([]float64, N)
		for v := range n {
			l.Pred[(start+v)*H+h] = meanAt(f, s.Design, masks[v], ts[v], j, pred)
		}
		return n, nil
	}, progress)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// heldOutObs returns the observations of voxels [start, start+n) of s
// without volume j.
func heldOutObs(s *Scan, j, start, n int) []posterior.Observation {
	N := s.Design.N
	d := dropVolume(s.Design, j)
	obs := make([]posterior.Observation, n)
	for v := range obs {
		g := start + v
		obs[v] = posterior.Observation{Design: d, X: dropValue(nil, s.Signal[g*N:(g+1)*N], j)}
	}
	return obs
}

// meanAt returns the mean over the joint samples (masks[k], theta[k]) of
// f's noise-free signal at measurement j of d; pred (length d.N) is
// scratch.
func meanAt(f family.Family, d family.Design, masks [][]bool, theta [][]float64, j int, pred []float64) float64 {
	var sum float64
	for k := range masks {
		f.Forward(d, theta[k], masks[k], pred)
		sum += pred[j]
	}
	return sum / float64(len(masks))
}

// LOOSummary summarises a method's per-voxel LOOCV errors.
type LOOSummary struct {
	Method string  `json:"method"`
	Voxels int     `json:"voxels"` // voxels with a finite error
	Median float64 `json:"median_rmse"`
	Mean   float64 `json:"mean_rmse"`
	// Over the white-matter voxels (WMVoxels of them).
	WMVoxels int     `json:"wm_voxels"`
	WMMedian float64 `json:"wm_median_rmse"`
	WMMean   float64 `json:"wm_mean_rmse"`
}

// SummariseLOO summarises errors (one per voxel) over all voxels and over
// those with wm[v] set.
func SummariseLOO(method string, errs []float64, wm []bool) LOOSummary {
	var all, w []float64
	for v, e := range errs {
		if math.IsNaN(e) {
			continue
		}
		all = append(all, e)
		if wm[v] {
			w = append(w, e)
		}
	}
	out := LOOSummary{Method: method, Voxels: len(all), WMVoxels: len(w)}
	out.Median, out.Mean = medianMean(all)
	out.WMMedian, out.WMMean = medianMean(w)
	return out
}

func medianMean(x []float64) (med, mean float64) {
	if len(x) == 0 {
		return math.NaN(), math.NaN()
	}
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	for _, v := range s {
		mean += v
	}
	return med, mean / float64(n)
}

// WhiteMatter marks the voxels of s whose full-data tensor fit (OLS + 1
// WLS iteration) has FA ≥ faMin (the usual white-matter threshold is
// 0.3); voxels that cannot be fitted are not white matter.
func WhiteMatter(s *Scan, faMin float64) ([]bool, error) {
	f, err := dti.NewFitter(s.Design, dti.DefaultWLSIterations)
	if err != nil {
		return nil, fmt.Errorf("dmri: %w", err)
	}
	fits := make([]dti.Fit, len(s.Voxels))
	errs := make([]error, len(s.Voxels))
	// Per-voxel failures go to errs; FitVoxels' own error is about its arguments.
	if err := f.FitVoxels(s.Signal, fits, errs, runtime.GOMAXPROCS(0)); err != nil {
		return nil, fmt.Errorf("dmri: %w", err)
	}
	wm := make([]bool, len(s.Voxels))
	for v := range wm {
		wm[v] = errs[v] == nil && fits[v].FA >= faMin
	}
	return wm, nil
}
