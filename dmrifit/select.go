package dmrifit

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/nifti"
	"github.com/prismsbi/prism/posterior"
)

// Model-selection fit (`prism dmri fit` with a family that is not
// ball-and-sticks, e.g. bszt and bszt-conv): for every voxel the network's
// model posterior q(M | x, λ) over the family's whole model list, the
// presence probability of every component and component class, the MAP
// model, the model-averaged predicted signal, and the BedpostX maps of
// the family's plain sticks where it has any.

// Class is a group of exchangeable components (family.Class).
type Class = family.Class

// ComponentClasses groups the components of f into classes
// (family.ComponentClasses).
func ComponentClasses(f family.Family) []Class { return family.ComponentClasses(f) }

// isPlainStick reports whether a class holds plain sticks with a fibre
// direction (θ, φ), the compartments BedpostX's maps describe.
// They are recognised by their tags (family/tags.go): a stick, oriented,
// and not dispersed.
func isPlainStick(f family.Family, cl Class) bool {
	c := f.Components()[cl.Components[0]]
	if !c.Has(family.TagStick) || !c.Has(family.TagOriented) || c.Has(family.TagDispersed) {
		return false
	}
	has := map[string]bool{}
	for _, p := range c.Params {
		has[p.Name] = true
	}
	return has["theta"] && has["phi"]
}

// SelectFitter fits the model posterior of any dMRI family with a
// trained network.
type SelectFitter struct {
	post    *posterior.Posterior
	fam     family.Family
	set     FitSettings
	so      posterior.SampleOptions
	Models  []Model
	Classes []Class
	masks   [][]bool
	// Sticks are the plain-stick components (≤ MaxFibres) written in the
	// BedpostX layout, frac their positions in Params.Fractions.
	Sticks []int
	frac   []int
	// cs is the correction (Method None without one); class[m] is model
	// m's class (the models equal up to relabelling exchangeable
	// compartments, selectClass) and always[m] whether it is corrected in
	// every voxel (FitSettings.CorrectAlways).
	cs     correct.Settings
	class  []string
	always []bool
	// With a correction of a sampled fit: groups are the family's
	// exchangeable compartments (selectClass) and alwaysMasks the
	// supported masks with at most CorrectAlways compartments.
	groups      [][]int
	alwaysMasks [][]bool
	// sampled: the family has too many models to list (more than
	// MaxListedComponents components); the model posterior is summarised
	// from ModelDraws draws per voxel, Models is empty and Selection.MAP
	// holds the MAP mask's bit code (Σ M_k 2^k) instead of a list index.
	sampled bool
}

// ModelDraws is the number of draws of q(M | x, λ) per voxel from which
// a sampled model-selection fit (a family with more than
// MaxListedComponents components, such as bszt-conv) estimates the
// component and class probabilities (binomial standard error ≤ 0.5/√256 ≈
// 0.031) and among whose distinct masks it takes the MAP model.
const ModelDraws = 256

// NewSelectFitter prepares a model-selection fit. With a correction
// (FitSettings.Correct) the model probabilities come from the corrected
// evidence of the candidate classes (fitBatch). The ESS pass of the
// ball-and-sticks Fitter is not supported.
func NewSelectFitter(p *posterior.Posterior, s FitSettings) (*SelectFitter, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s = s.ResolveCorrect(false)
	if s.ESSSamples > 0 {
		return nil, fmt.Errorf("dmri: the ESS map is only available for ball-and-sticks families (b3s)")
	}
	f := p.Family()
	if _, ok := f.(family.TableDesigner); !ok {
		return nil, fmt.Errorf("dmri: `dmri fit` needs a network of a dMRI family (b3s, bszt, …); %s is not one", f.Name())
	}
	ft := &SelectFitter{post: p, fam: f, set: s, Classes: ComponentClasses(f)}
	solver, _ := posterior.ParseSolver(s.Solver)
	ft.so = posterior.SampleOptions{Steps: s.Steps, Solver: solver}
	if err := s.CheckScope(f); err != nil {
		return nil, err
	}
	if c := len(f.Components()); c > MaxListedComponents {
		if c > 32 {
			return nil, fmt.Errorf("dmri: %s has %d components; a model-selection fit handles at most 32", f.Name(), c)
		}
		ft.sampled = true
	} else {
		var err error
		if ft.Models, err = ModelList(f, s.Lambda); err != nil {
			return nil, err
		}
		for _, m := range ft.Models {
			ft.masks = append(ft.masks, m.Mask)
		}
	}
	if err := ft.setUpCorrection(); err != nil {
		return nil, err
	}
	simplexPos := map[int]int{}
	for i, k := range f.Layout().Simplex {
		simplexPos[k] = i
	}
	for _, cl := range ft.Classes {
		if !isPlainStick(f, cl) {
			continue
		}
		for _, k := range cl.Components {
			pos, ok := simplexPos[k]
			if !ok || len(ft.Sticks) == MaxFibres {
				continue
			}
			ft.Sticks = append(ft.Sticks, k)
			ft.frac = append(ft.frac, pos)
		}
	}
	return ft, nil
}

// Settings returns the fitter's settings.
func (ft *SelectFitter) Settings() FitSettings { return ft.set }

// Family returns the fitted family.
func (ft *SelectFitter) Family() family.Family { return ft.fam }

// Selection is the model-selection fit of the voxels of a scan. Per-voxel
// arrays of voxel v: CompProb[v*C+k], ClassProb[v*len(Classes)+c],
// Pred[v*N+j] (N measurements); stick samples at [v*Samples+s].
type Selection struct {
	N, Samples, Meas int
	Components       int
	// ModelMass is Σ q(M | x, λ) over the model list before
	// renormalising; MAP is the index into Models of the most probable
	// model and MAPProb its renormalised probability. A sampled fit
	// (SelectFitter.sampled) keeps the MAP mask's bit code in MAP, q of
	// the MAP mask in MAPProb and the q mass of the distinct draws in
	// ModelMass.
	ModelMass []float32
	MAP       []int32
	MAPProb   []float32
	// CompProb is P(component k active | x) = Σ_M q(M | x, λ) M_k;
	// ClassProb is P(any component of class c active | x).
	CompProb  []float32
	ClassProb []float32
	// ModelProb is the renormalised q(M | x, λ), [v*len(Models)+m]; kept
	// only when the fitter was asked to (KeepModelProb), nil otherwise.
	ModelProb []float32
	// Pred is the model-averaged predicted b0-normalised signal, the mean
	// of the noise-free signal over the joint samples (M, θ); PPRMSE the
	// RMSE of Pred against the data.
	Pred   []float32
	PPRMSE []float32
	// Stick samples of the plain sticks, relabelled in every sample by
	// decreasing fraction (absent sticks last, Active false), and the
	// fraction-weighted mean diffusivity of the active sticks.
	F, Theta, Phi [MaxFibres][]float32
	Active        [MaxFibres][]bool
	StickD        []float32
	// With a correction (nil without): the diagnostics of the MAP
	// model's correction as in Result (ESS, tempering steps, log-evidence
	// SE, 1 where the voxel's correction failed its diagnostics), and the
	// number of model classes corrected.
	CorrESS, CorrSteps, CorrLogZSE, CorrFailed, CorrClasses []float32
}

// KeepModelProbMax is the largest model list whose per-model
// probabilities Fit keeps and WriteSelection writes as model_prob (one
// volume per model; bszt's 2,046 models would take 8 kB per voxel).
const KeepModelProbMax = 64

func (ft *SelectFitter) newSelection(n, meas int) *Selection {
	S, C := ft.set.Samples, len(ft.fam.Components())
	a := &Selection{N: n, Samples: S, Meas: meas, Components: C,
		ModelMass: make([]float32, n), MAP: make([]int32, n), MAPProb: make([]float32, n),
		CompProb: make([]float32, n*C), ClassProb: make([]float32, n*len(ft.Classes)),
		Pred: make([]float32, n*meas), PPRMSE: make([]float32, n), StickD: make([]float32, n*S)}
	if !ft.sampled && len(ft.Models) <= KeepModelProbMax {
		a.ModelProb = make([]float32, n*len(ft.Models))
	}
	if ft.cs.Method != correct.None {
		a.CorrESS, a.CorrSteps, a.CorrLogZSE = make([]float32, n), make([]float32, n), make([]float32, n)
		a.CorrFailed, a.CorrClasses = make([]float32, n), make([]float32, n)
	}
	for i := range ft.Sticks {
		a.F[i] = make([]float32, n*S)
		a.Theta[i] = make([]float32, n*S)
		a.Phi[i] = make([]float32, n*S)
		a.Active[i] = make([]bool, n*S)
	}
	return a
}

// Fit fits every voxel of s, in batches of Settings().BatchSize run
// concurrently, one per core. Every voxel's result depends only on the
// seed, its position in s.Voxels and its grid index, not on the batch
// size or the number of cores. With a state st (nil for none), the
// voxels of its complete records are taken from a, which must be the
// Selection st was opened with (NewSelection), and every finished batch
// is appended to st in voxel order. progress, if not nil, is called with
// the number of voxels done (resumed ones included); a cancelled ctx
// stops with ctx.Err() after the running batches.
func (ft *SelectFitter) Fit(ctx context.Context, s *Scan, a *Selection, st *SelectState, progress func(done int)) (*Selection, error) {
	total := len(s.Voxels)
	if total == 0 {
		return nil, fmt.Errorf("dmri: no voxel to fit")
	}
	first := 0
	if a == nil {
		a = ft.NewSelection(s)
	}
	if a.N != total || a.Meas != s.Design.N {
		return nil, fmt.Errorf("dmri: selection of %d voxels × %d measurements for a scan of %d × %d", a.N, a.Meas, total, s.Design.N)
	}
	if st != nil {
		if first = st.Done(); first > total {
			return nil, fmt.Errorf("dmri: the partial state covers %d voxels, the scan has %d", first, total)
		}
	}
	size := ft.set.BatchSize
	nb := (total - first + size - 1) / size
	var (
		mu       sync.Mutex
		finished = make([]bool, nb)
		next     int // first batch not yet in st
	)
	report := progress
	if progress != nil && first > 0 {
		report = func(done int) { progress(first + done) }
	}
	err := parallelJobs(ctx, nb, func(i int) (int, error) {
		at := first + i*size
		n := min(size, total-at)
		if err := ft.fitBatch(s, at, n, a); err != nil {
			return 0, err
		}
		if st == nil {
			return n, nil
		}
		mu.Lock()
		defer mu.Unlock()
		finished[i] = true
		for ; next < nb && finished[next]; next++ {
			b := first + next*size
			if err := st.Append(a, b, min(size, total-b)); err != nil {
				return n, err
			}
		}
		return n, nil
	}, report)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// NewSelection returns an empty Selection for the voxels of s, to be
// filled by OpenSelectState and Fit.
func (ft *SelectFitter) NewSelection(s *Scan) *Selection {
	return ft.newSelection(len(s.Voxels), s.Design.N)
}

// selectStreamTag separates the model draws of the selection fit from the
// other random streams.
const selectStreamTag = 0x73656c656374 // "select"

// fitBatch fits voxels [start, start+n) of s into a (which covers the
// whole scan; batches write disjoint ranges).
func (ft *SelectFitter) fitBatch(s *Scan, start, n int, a *Selection) error {
	N := s.Design.N
	obs := make([]posterior.Observation, n)
	for v := range obs {
		obs[v] = posterior.Observation{Design: s.Design, X: s.Signal[(start+v)*N : (start+v+1)*N]}
	}
	masks, ts, err := ft.jointSamples(obs, s.Voxels[start:start+n], start, start, a)
	if err != nil {
		return err
	}
	S := a.Samples
	pred := make([]float64, N)
	mean := make([]float64, N)
	nst := len(ft.Sticks)
	order := make([]int, nst)
	fr := make([]float64, nst)
	for v := range n {
		g := start + v
		clear(mean)
		for j := range S {
			th, mk := ts[v][j], masks[v][j]
			ft.fam.Forward(s.Design, th, mk, pred)
			for m, y := range pred {
				mean[m] += y
			}
			if nst == 0 {
				continue
			}
			nat := ft.fam.Natural(th, mk)
			k := g*S + j
			var fd, fsum float64
			for i := range nst {
				order[i] = i
				fr[i] = 0
				if mk[ft.Sticks[i]] {
					fr[i] = nat.Fractions[ft.frac[i]]
					fd += fr[i] * nat.Components[ft.Sticks[i]]["d"]
					fsum += fr[i]
				}
			}
			if fsum > 0 {
				a.StickD[k] = float32(fd / fsum)
			}
			sort.SliceStable(order, func(x, y int) bool { return fr[order[x]] > fr[order[y]] })
			for slot, i := range order {
				if !mk[ft.Sticks[i]] {
					continue
				}
				par := nat.Components[ft.Sticks[i]]
				a.F[slot][k] = float32(fr[i])
				a.Theta[slot][k] = float32(par["theta"])
				a.Phi[slot][k] = float32(par["phi"])
				a.Active[slot][k] = true
			}
		}
		x := obs[v].X
		var ss float64
		for m := range mean {
			mean[m] /= float64(S)
			a.Pred[g*N+m] = float32(mean[m])
			d := mean[m] - x[m]
			ss += d * d
		}
		a.PPRMSE[g] = float32(math.Sqrt(ss / float64(N)))
	}
	return nil
}

// jointSamples computes the model posterior of the voxels obs (positions
// start, start+1, … of the fitted voxels, grid indices ids; start keys
// their random streams) into a's per-voxel maps at at, at+1, … (model
// mass, MAP, component and class probabilities, with a correction its
// diagnostics) and returns a.Samples joint posterior draws (mask, latent
// θ) per voxel: from the corrected posterior with a correction, else M
// from the network's q(M | x, λ) over the model list and θ ~ q(θ | M, x).
func (ft *SelectFitter) jointSamples(obs []posterior.Observation, ids []int, start, at int, a *Selection) ([][][]bool, [][][]float64, error) {
	if ft.sampled && ft.cs.Method != correct.None {
		return ft.correctSampled(obs, start, at, a)
	}
	if ft.sampled {
		return ft.sampledJoint(obs, start, at, a)
	}
	opt := posterior.Options{Seed: ft.set.Seed, Offset: uint64(start)}
	lq, err := ft.post.LogProbMasks(obs, ft.set.Lambda, [][][]bool{ft.masks}, opt)
	if err != nil {
		return nil, nil, fmt.Errorf("dmri: model posterior: %w", err)
	}
	M, C, K, S := len(ft.Models), a.Components, len(ft.Classes), a.Samples
	n := len(obs)
	probs := make([][]float32, n)
	for v := range n {
		probs[v] = make([]float32, M)
		a.ModelMass[at+v] = float32(normalise(lq[v], probs[v]))
	}
	so := ft.so
	so.Options = opt
	var (
		masks [][][]bool
		ts    [][][]float64
	)
	if ft.cs.Method != correct.None {
		if masks, ts, err = ft.correctBatch(obs, so, probs, a, at); err != nil {
			return nil, nil, err
		}
	}
	for v := range n {
		g := at + v
		p := probs[v]
		if a.ModelProb != nil {
			copy(a.ModelProb[g*M:(g+1)*M], p)
		}
		best := 0
		comp := a.CompProb[g*C : (g+1)*C]
		class := a.ClassProb[g*K : (g+1)*K]
		for m, q := range p {
			if q > p[best] {
				best = m
			}
			ft.addPresence(comp, class, ft.masks[m], q)
		}
		a.MAP[g], a.MAPProb[g] = int32(best), p[best]
	}
	if ft.cs.Method == correct.None {
		masks = make([][][]bool, n)
		for v := range n {
			r := rand.New(rand.NewPCG(ft.set.Seed^selectStreamTag, uint64(ids[v])))
			masks[v] = make([][]bool, S)
			for j := range S {
				masks[v][j] = ft.masks[drawCategorical(r, probs[v])]
			}
		}
		sets, err := ft.post.SampleTheta(obs, masks, so)
		if err != nil {
			return nil, nil, fmt.Errorf("dmri: parameter posterior: %w", err)
		}
		ts = make([][][]float64, n)
		for v := range n {
			ts[v] = sets[v].Theta
		}
	}
	return masks, ts, nil
}

// sampledJoint is jointSamples for a family whose models are too many to
// list: max(ModelDraws, Samples) draws of q(M | x, λ) (restricted to the
// prior's support) per voxel give the component and class probabilities
// as frequencies; the MAP model is the draw of largest exact q (scored by
// LogProbMasks), MAPProb its q and ModelMass the q mass of the distinct
// draws (how much of q they cover). The first Samples draws are the
// joint samples' models, with θ ~ q(θ | M, x).
func (ft *SelectFitter) sampledJoint(obs []posterior.Observation, start, at int, a *Selection) ([][][]bool, [][][]float64, error) {
	opt := posterior.Options{Seed: ft.set.Seed, Offset: uint64(start)}
	n, C, K, S := len(obs), a.Components, len(ft.Classes), a.Samples
	D := max(ModelDraws, S)
	dm, err := ft.drawModels(obs, D, opt)
	if err != nil {
		return nil, nil, err
	}
	w := float32(1) / float32(D)
	masks := make([][][]bool, n)
	for v := range n {
		g := at + v
		comp := a.CompProb[g*C : (g+1)*C]
		class := a.ClassProb[g*K : (g+1)*K]
		for _, m := range dm.draws[v] {
			ft.addPresence(comp, class, m, w)
		}
		a.MAP[g], a.MAPProb[g], a.ModelMass[g] = int32(family.MaskCode(dm.mapMask[v])), float32(dm.mapQ[v]), float32(dm.mass[v])
		masks[v] = dm.draws[v][:S]
	}
	so := ft.so
	so.Options = opt
	sets, err := ft.post.SampleTheta(obs, masks, so)
	if err != nil {
		return nil, nil, fmt.Errorf("dmri: parameter posterior: %w", err)
	}
	ts := make([][][]float64, n)
	for v := range n {
		ts[v] = sets[v].Theta
	}
	return masks, ts, nil
}

// drawnModels are a sampled fit's draws of q(M | x, λ), per voxel.
type drawnModels struct {
	draws   [][][]bool // the draws, on the prior's support
	mapMask [][]bool   // the distinct draw of largest exact q
	mapQ    []float64  // its q
	mass    []float64  // the q mass of the distinct draws
}

// drawModels draws D masks per voxel of obs from q(M | x, λ) (streams
// opt) and scores their distinct masks exactly (LogProbMasks).
func (ft *SelectFitter) drawModels(obs []posterior.Observation, D int, opt posterior.Options) (*drawnModels, error) {
	draws, err := ft.post.SampleMasksSupported(obs, ft.set.Lambda, D, opt)
	if err != nil {
		return nil, fmt.Errorf("dmri: model posterior: %w", err)
	}
	distinct := make([][][]bool, len(obs))
	for v := range obs {
		distinct[v] = distinctMasks(draws[v])
	}
	lq, err := ft.post.LogProbMasks(obs, ft.set.Lambda, distinct, opt)
	if err != nil {
		return nil, fmt.Errorf("dmri: model posterior: %w", err)
	}
	dm := &drawnModels{draws: draws, mapMask: make([][]bool, len(obs)), mapQ: make([]float64, len(obs)), mass: make([]float64, len(obs))}
	for v := range obs {
		best := 0
		for i, l := range lq[v] {
			dm.mass[v] += math.Exp(l)
			if l > lq[v][best] {
				best = i
			}
		}
		dm.mapMask[v], dm.mapQ[v] = distinct[v][best], math.Exp(lq[v][best])
	}
	return dm, nil
}

// addPresence adds weight w to comp[k] for every active component k of
// mask m and to class[c] for every class c with an active component.
func (ft *SelectFitter) addPresence(comp, class []float32, m []bool, w float32) {
	for k, on := range m {
		if on {
			comp[k] += w
		}
	}
	for c, cl := range ft.Classes {
		for _, k := range cl.Components {
			if m[k] {
				class[c] += w
				break
			}
		}
	}
}

// mapModels returns the model list of a sampled fit's maps: the distinct
// MAP masks of a's voxels in increasing bit code, indexed from 1, and
// each code's index.
func (ft *SelectFitter) mapModels(a *Selection) ([]Model, map[int32]int) {
	codes := map[int32]bool{}
	for _, c := range a.MAP {
		codes[c] = true
	}
	sorted := make([]int32, 0, len(codes))
	for c := range codes {
		sorted = append(sorted, c)
	}
	slices.Sort(sorted)
	comps := ft.fam.Components()
	models := make([]Model, len(sorted))
	index := make(map[int32]int, len(sorted))
	for i, c := range sorted {
		m := make([]bool, len(comps))
		family.MaskFromCode(uint32(c), m)
		models[i] = newModel(comps, m, i+1)
		index[c] = i + 1
	}
	return models, index
}

// SelectionSidecar is selection.json, the key to the maps of a
// model-selection fit.
type SelectionSidecar struct {
	Family     string   `json:"family"`
	Lambda     float64  `json:"lambda"`
	Components []string `json:"components"`
	Classes    []Class  `json:"classes"`
	// Sticks are the components written in the BedpostX layout (sticks
	// 1…len relabelled per sample by decreasing fraction).
	Sticks []string `json:"bedpostx_sticks,omitempty"`
	Models []Model  `json:"models"`
	Maps   []string `json:"maps"`
	// ModelDraws is set for a sampled fit (ModelDraws): comp_prob and
	// class_prob are frequencies over that many draws of q(M | x, λ), and
	// Models lists only the voxels' MAP models.
	ModelDraws int `json:"model_draws,omitempty"`
}

// WriteSelection writes the maps of a model-selection fit into dir (every
// image on the grid and with the geometry of s.Ref, zero outside the fitted
// voxels; docs/dmri.md):
//
//	comp_prob     4-D, one volume per component (mask order): P(active | x)
//	class_prob    4-D, one volume per class: P(any of its components | x)
//	map_model     int16, 1-based index into selection.json's models
//	map_prob      q of the MAP model
//	model_mass    Σ q(M | x, λ) over the model list before renormalising
//	              (sampled fits: over the distinct draws)
//	model_prob    4-D, one volume per model (only for ≤ KeepModelProbMax models)
//	pred_signal   4-D, the model-averaged predicted b0-normalised signal,
//	              one volume per measurement of the input
//	pp_rmse       RMSE of pred_signal against the normalised data
//	correct_*     with a correction: correct_ess, correct_steps,
//	              correct_logz_se and correct_failed of the MAP model (as
//	              WriteFit's), correct_classes the number of model
//	              classes corrected
//	selection.json  components, classes and models (the key to the maps)
//
// and, when the family has plain sticks, the BedpostX layout of those
// (WriteBedpostX; mean_dsamples is the fraction-weighted mean diffusivity
// of the active sticks, mean_d_stdsamples 0, S0 1).
func (ft *SelectFitter) WriteSelection(dir string, s *Scan, a *Selection) error {
	if a.N != len(s.Voxels) {
		return fmt.Errorf("dmri: a selection of %d voxels for a scan of %d", a.N, len(s.Voxels))
	}
	var maps []string
	if len(ft.Sticks) > 0 {
		n := len(ft.Sticks)
		p, err := stickSamples(s.Voxels, a.Samples, a.F[:n], a.Theta[:n], a.Phi[:n], a.Active[:n])
		if err != nil {
			return err
		}
		copy(p.D, a.StickD)
		if err := WriteBedpostX(dir, s.Ref, s.Mask, p); err != nil {
			return err
		}
		maps = append(maps, "BedpostX layout of the sticks")
	}
	nx, ny, nz := s.Nx, s.Ny, s.Nz
	nv := nx * ny * nz
	write := func(name string, dt nifti.Datatype, vols int, fill func(vol *nifti.Volume)) error {
		if err := s.writeMap(dir, name, dt, vols, fill); err != nil {
			return err
		}
		maps = append(maps, name+OutputExt)
		return nil
	}
	perVoxel := func(name string, src []float32, vols int) error {
		return write(name, nifti.Float32, vols, func(vol *nifti.Volume) {
			for v, i := range s.Voxels {
				for c := range vols {
					vol.Data[i+c*nv] = src[v*vols+c]
				}
			}
		})
	}
	if err := perVoxel("comp_prob", a.CompProb, a.Components); err != nil {
		return err
	}
	if err := perVoxel("class_prob", a.ClassProb, len(ft.Classes)); err != nil {
		return err
	}
	models, index, dt := ft.Models, func(v int) int { return ft.Models[a.MAP[v]].Index }, nifti.Int16
	if ft.sampled {
		var byCode map[int32]int
		models, byCode = ft.mapModels(a)
		index = func(v int) int { return byCode[a.MAP[v]] }
		dt = nifti.Int32 // up to one model per voxel
	}
	if err := write("map_model", dt, 1, func(vol *nifti.Volume) {
		for v, i := range s.Voxels {
			vol.Data[i] = float32(index(v))
		}
	}); err != nil {
		return err
	}
	if err := perVoxel("map_prob", a.MAPProb, 1); err != nil {
		return err
	}
	if err := perVoxel("model_mass", a.ModelMass, 1); err != nil {
		return err
	}
	if a.ModelProb != nil {
		if err := perVoxel("model_prob", a.ModelProb, len(ft.Models)); err != nil {
			return err
		}
	}
	if err := perVoxel("pred_signal", a.Pred, a.Meas); err != nil {
		return err
	}
	if err := perVoxel("pp_rmse", a.PPRMSE, 1); err != nil {
		return err
	}
	if a.CorrESS != nil {
		for _, m := range []struct {
			name string
			v    []float32
		}{{"correct_ess", a.CorrESS}, {"correct_steps", a.CorrSteps}, {"correct_logz_se", a.CorrLogZSE}, {"correct_failed", a.CorrFailed}, {"correct_classes", a.CorrClasses}} {
			if err := perVoxel(m.name, m.v, 1); err != nil {
				return err
			}
		}
	}
	side := SelectionSidecar{Family: ft.fam.Name(), Lambda: ft.set.Lambda, Classes: ft.Classes, Models: models, Maps: maps}
	if ft.sampled {
		side.ModelDraws = max(ModelDraws, a.Samples)
	}
	for _, c := range ft.fam.Components() {
		side.Components = append(side.Components, c.Name)
	}
	for _, k := range ft.Sticks {
		side.Sticks = append(side.Sticks, ft.fam.Components()[k].Name)
	}
	return atomicfile.WriteJSON(filepath.Join(dir, "selection.json"), side)
}

// BallAndSticks reports whether f is a multi-shell ball-and-sticks family
// that the BedpostX-style Fitter handles (NewFitter accepts it).
func BallAndSticks(f family.Family) bool {
	ball, sticks := 0, 0
	for _, c := range f.Components() {
		switch {
		case c.Kind != family.Base:
		case c.Has(family.TagBall) && c.Has(family.TagSharedDiffusivity):
			ball++
		case c.Has(family.TagStick) && c.Has(family.TagSharedDiffusivity):
			sticks++
		default:
			return false
		}
	}
	return ball == 1 && sticks >= 1
}
