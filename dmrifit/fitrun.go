package dmrifit

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/engine/kernels"
	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/nifti"
)

// StateFile is the name of the partial state `prism dmri fit` keeps in
// its output folder while it runs.
const StateFile = ".prism-fit.state"

// Shape returns the record shape of the fitter's batches.
func (ft *Fitter) Shape() ResultShape {
	return ResultShape{Samples: ft.set.Samples, Models: len(ft.Models), Sticks: ft.Sticks}
}

// Fit fits every voxel of s in batches of Settings().BatchSize. Batches
// already in st (a resumed run) are reused; every new batch is appended
// to st (when st is not nil) before the next starts. progress, if not
// nil, is called after each batch with the number of voxels done. A
// cancelled ctx stops after the current batch with ctx.Err().
func (ft *Fitter) Fit(ctx context.Context, s *Scan, st *FitState, progress func(done int)) (*Result, error) {
	total := len(s.Voxels)
	if total == 0 {
		return nil, fmt.Errorf("dmri: no voxel to fit")
	}
	sh := ft.Shape()
	all := newBatch(0, total, sh.Samples, sh.Models, sh.Sticks)
	done := 0
	if st != nil {
		if st.Done() > total {
			return nil, fmt.Errorf("dmri: the partial state covers %d voxels, the scan has %d", st.Done(), total)
		}
		for _, b := range st.Batches {
			all.place(b)
		}
		done = st.Done()
		st.Batches = nil // free the decoded copies
	}
	if progress != nil {
		progress(done)
	}
	// Batches run concurrently, one per core, each with its kernels inline
	// (kernels.LimitParallelism(1)), and are appended to st in order by
	// this goroutine while the next ones are fitted: one batch spread over
	// both cores left them idle in its serial phases, and rounds of batches
	// left them idle while a round's results were written (167 and 174 %
	// CPU on the bundled whole brain). Every voxel's random streams depend
	// on its position and the seed only, not on which batch or core fits
	// it, and the network computes every row with the same arithmetic
	// wherever it sits in a batch, a row chunk (network.maskedChunks, which
	// follow the batch's rows and GOMAXPROCS) or a cross-attention segment,
	// so the output is the same bit for bit for any --batch and GOMAXPROCS
	// (TestFitBatchAndWorkersInvariance; docs/validation.md, "Golden
	// outputs…").
	size, first := ft.set.BatchSize, done
	nb := (total - first + size - 1) / size
	workers := min(runtime.GOMAXPROCS(0), nb)
	if workers > 1 {
		kernels.LimitParallelism(1)
		defer kernels.UnlimitParallelism(1)
	}
	type result struct {
		b   *Result
		err error
	}
	results := make([]chan result, nb)
	for i := range results {
		results[i] = make(chan result, 1)
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	// When Fit returns, stop launching and wait for the batches in flight,
	// so that no work outlives the call.
	defer func() {
		close(quit)
		wg.Wait()
	}()
	cores := make(chan struct{}, workers)    // batches being fitted
	window := make(chan struct{}, 2*workers) // batches fitted or in flight but not yet appended (memory bound)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range nb {
			select {
			case window <- struct{}{}:
			case <-quit:
				return
			}
			select {
			case cores <- struct{}{}:
			case <-quit:
				return
			}
			if ctx.Err() != nil {
				return
			}
			at := first + i*size
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, err := ft.FitBatch(s, at, min(size, total-at))
				<-cores
				results[i] <- result{b, err}
			}()
		}
	}()
	for i := range nb {
		var r result
		select {
		case r = <-results[i]:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if r.err != nil {
			return nil, r.err
		}
		if st != nil {
			if err := st.Append(r.b); err != nil {
				return nil, err
			}
		}
		all.place(r.b)
		done += r.b.N
		<-window
		if progress != nil {
			progress(done)
		}
		if err := ctx.Err(); err != nil && done < total {
			return nil, err
		}
	}
	return all, nil
}

// place copies batch b into the whole-scan batch a.
func (a *Result) place(b *Result) {
	S, M := a.Samples, a.Models
	copy(a.ModelProb[b.Start*M:], b.ModelProb)
	copy(a.ModelMass[b.Start:], b.ModelMass)
	copy(a.D[b.Start*S:], b.D)
	copy(a.DStd[b.Start*S:], b.DStd)
	copy(a.ESS[b.Start:], b.ESS)
	copy(a.PPRMSE[b.Start:], b.PPRMSE)
	copy(a.CorrESS[b.Start:], b.CorrESS)
	copy(a.CorrSteps[b.Start:], b.CorrSteps)
	copy(a.CorrLogZSE[b.Start:], b.CorrLogZSE)
	copy(a.CorrFailed[b.Start:], b.CorrFailed)
	for i := range a.Sticks {
		copy(a.F[i][b.Start*S:], b.F[i])
		copy(a.Theta[i][b.Start*S:], b.Theta[i])
		copy(a.Phi[i][b.Start*S:], b.Phi[i])
		copy(a.Active[i][b.Start*S:], b.Active[i])
	}
}

// StickSamples converts a whole-scan result into a StickSamples for
// WriteBedpostX. Samples in which a stick is absent keep f = 0 and get
// the stick's dyad (the principal axis over the samples where it is
// present) as θ, φ, so that tools reading merged_th/ph samples without
// looking at f still see a meaningful axis; StickSamples.Dyad ignores them.
// S0 is 1 (the b3s signal is relative to b0).
func (a *Result) StickSamples(voxels []int) (*StickSamples, error) {
	if len(voxels) != a.N {
		return nil, fmt.Errorf("dmri: %d voxels for a fit of %d", len(voxels), a.N)
	}
	n := a.Sticks
	p, err := stickSamples(voxels, a.Samples, a.F[:n], a.Theta[:n], a.Phi[:n], a.Active[:n])
	if err != nil {
		return nil, err
	}
	copy(p.D, a.D)
	copy(p.DStd, a.DStd)
	return p, nil
}

// stickSamples builds the StickSamples of per-stick samples (f, θ, φ,
// active per stick, [voxel·S + sample]) with S0 = 1; samples in which a
// stick is absent get the stick's dyad as θ, φ (see Result.StickSamples). The
// diffusivities are the caller's to fill.
func stickSamples(voxels []int, S int, f, theta, phi [][]float32, active [][]bool) (*StickSamples, error) {
	p, err := NewStickSamples(voxels, len(f), S)
	if err != nil {
		return nil, err
	}
	for k := range p.S0 {
		p.S0[k] = 1
	}
	for i := range f {
		copy(p.F[i], f[i])
		copy(p.Theta[i], theta[i])
		copy(p.Phi[i], phi[i])
		p.Active[i] = append([]bool(nil), active[i]...)
		for v := range voxels {
			dir, _ := p.Dyad(i, v)
			th, ph := angles(dir)
			for s := range S {
				if k := v*S + s; !p.Active[i][k] {
					p.Theta[i][k], p.Phi[i][k] = float32(th), float32(ph)
				}
			}
		}
	}
	return p, nil
}

// NFibresProb returns P(number of sticks = k | x), k = 0 … Sticks, of
// voxel v from the model probabilities.
func (a *Result) NFibresProb(v int, models []Model) []float64 {
	out := make([]float64, a.Sticks+1)
	for m, mod := range models {
		out[mod.Sticks] += float64(a.ModelProb[v*a.Models+m])
	}
	return out
}

// MAPModel returns the index into models of voxel v's most probable model.
func (a *Result) MAPModel(v int) int {
	p := a.ModelProb[v*a.Models : (v+1)*a.Models]
	best := 0
	for m := range p {
		if p[m] > p[best] {
			best = m
		}
	}
	return best
}

// ModelSidecar is the JSON sidecar of model_prob.
type ModelSidecar struct {
	Family      string   `json:"family"`
	Lambda      float64  `json:"lambda"`
	Components  []string `json:"components"`
	Models      []Model  `json:"models"`
	Description string   `json:"description"`
}

// WriteFit writes the outputs of `prism dmri fit` into dir (created if
// needed), every image on the grid and with the geometry of s.Ref, zero
// outside the fitted voxels: the BedpostX layout (WriteBedpostX) and
//
//	model_prob     4-D, one volume per model of ft.Models (model_prob.json)
//	nfibres_prob   4-D, P(0 … Sticks sticks)
//	map_model      int16, 1-based index of the most probable model
//	ess            normalised importance-sampling ESS under the MAP model
//	               (when computed)
//	pp_rmse        posterior-predictive RMSE of the b0-normalised signal
//	correct_ess, correct_steps, correct_logz_se, correct_failed
//	               with a correction: the MAP model's ESS, tempering
//	               steps and log-evidence SE, and 1 where the voxel's
//	               correction failed its diagnostics
//	peaks          4-D, 3 volumes per stick: MRtrix-style peaks, the dyad
//	               in scanner (world) coordinates scaled by its mean f
func (ft *Fitter) WriteFit(dir string, s *Scan, a *Result) error {
	p, err := a.StickSamples(s.Voxels)
	if err != nil {
		return err
	}
	if err := WriteBedpostX(dir, s.Ref, s.Mask, p); err != nil {
		return err
	}
	nx, ny, nz := s.Nx, s.Ny, s.Nz
	nv := nx * ny * nz
	write := func(name string, dt nifti.Datatype, vols int, fill func(vol *nifti.Volume)) error {
		return s.writeMap(dir, name, dt, vols, fill)
	}
	M := len(ft.Models)
	if err := write("model_prob", nifti.Float32, M, func(vol *nifti.Volume) {
		for v, i := range s.Voxels {
			for m := range M {
				vol.Data[i+m*nv] = a.ModelProb[v*M+m]
			}
		}
	}); err != nil {
		return err
	}
	var comps []string
	for _, c := range ft.fam.Components() {
		comps = append(comps, c.Name)
	}
	side := ModelSidecar{Family: ft.fam.Name(), Lambda: ft.set.Lambda, Components: comps, Models: ft.Models,
		Description: "model_prob volume k (0-based) is q(M | x, λ) of models[k] (map_model value k+1), renormalised over this list of the masks with positive prior probability"}
	if err := atomicfile.WriteJSON(filepath.Join(dir, "model_prob.json"), side); err != nil {
		return err
	}
	if err := write("nfibres_prob", nifti.Float32, ft.Sticks+1, func(vol *nifti.Volume) {
		for v, i := range s.Voxels {
			for k, q := range a.NFibresProb(v, ft.Models) {
				vol.Data[i+k*nv] = float32(q)
			}
		}
	}); err != nil {
		return err
	}
	if err := write("map_model", nifti.Int16, 1, func(vol *nifti.Volume) {
		for v, i := range s.Voxels {
			vol.Data[i] = float32(ft.Models[a.MAPModel(v)].Index)
		}
	}); err != nil {
		return err
	}
	if ft.set.ESSSamples > 0 {
		if err := write("ess", nifti.Float32, 1, func(vol *nifti.Volume) {
			for v, i := range s.Voxels {
				vol.Data[i] = a.ESS[v]
			}
		}); err != nil {
			return err
		}
	}
	if ft.cs.Method != correct.None {
		for _, m := range []struct {
			name string
			v    []float32
		}{{"correct_ess", a.CorrESS}, {"correct_steps", a.CorrSteps}, {"correct_logz_se", a.CorrLogZSE}, {"correct_failed", a.CorrFailed}} {
			if err := write(m.name, nifti.Float32, 1, func(vol *nifti.Volume) {
				for v, i := range s.Voxels {
					vol.Data[i] = m.v[v]
				}
			}); err != nil {
				return err
			}
		}
	}
	if err := write("pp_rmse", nifti.Float32, 1, func(vol *nifti.Volume) {
		for v, i := range s.Voxels {
			vol.Data[i] = a.PPRMSE[v]
		}
	}); err != nil {
		return err
	}
	rot := worldRotation(s.Ref)
	flip := s.Ref.FSLFlipX()
	return write("peaks", nifti.Float32, 3*ft.Sticks, func(vol *nifti.Volume) {
		for st := range ft.Sticks {
			for v, i := range s.Voxels {
				f := p.MeanF(st, v)
				if !(f > 0) {
					continue
				}
				dir, _ := p.Dyad(st, v)
				w := PeakDirection(dir, flip, rot)
				for c := range 3 {
					vol.Data[i+(3*st+c)*nv] = float32(f * w[c])
				}
			}
		}
	})
}

// worldRotation returns the voxel-axis-to-world rotation of h: the
// columns of the 3×3 part of its voxel-to-world matrix, each normalised
// (voxel sizes removed).
func worldRotation(h *nifti.Header) [3][3]float64 {
	m := h.VoxelToWorld()
	var r [3][3]float64
	for c := range 3 {
		n := math.Sqrt(m[0][c]*m[0][c] + m[1][c]*m[1][c] + m[2][c]*m[2][c])
		if n == 0 {
			n = 1
		}
		for row := range 3 {
			r[row][c] = m[row][c] / n
		}
	}
	return r
}

// PeakDirection maps a direction in the b-vectors' (FSL) frame to world
// (scanner) coordinates as MRtrix stores peaks: x negated when flip
// (nifti.Header.FSLFlipX) gives the image's voxel axes, then rot (the
// voxel-to-world rotation) gives world axes. The result is renormalised
// to unit length (it already is for an orthogonal transform).
func PeakDirection(d [3]float64, flip bool, rot [3][3]float64) [3]float64 {
	if flip {
		d[0] = -d[0]
	}
	var w [3]float64
	var n float64
	for r := range 3 {
		w[r] = rot[r][0]*d[0] + rot[r][1]*d[1] + rot[r][2]*d[2]
		n += w[r] * w[r]
	}
	if n = math.Sqrt(n); n > 0 {
		for r := range w {
			w[r] /= n
		}
	}
	return w
}
