package dmrifit

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
)

// The correction of a model-selection fit (`dmri fit --correct` with a
// family such as bszt): per voxel, the exact evidence p(x | M) of every
// candidate model class by SMC from the Laplace approximation (package
// correct), combined with the mask prior p(M | λ), replaces the network's
// q(M | x, λ), and the samples come from the corrected posteriors.

// SelectDraws is the number of draws of q(θ | M, x) per model class from
// which a model-selection fit's correction searches the mode (each a
// start of the Newton search, correct.LaplaceOptions.Starts).
const SelectDraws = 16

// SelectParticles is the default number of particles of one SMC run of
// a model-selection fit (ball-and-sticks fits: DefaultCorrectSettings).
// The phantom of docs/validation.md was measured with it.
const SelectParticles = 64

// setUpCorrection prepares ft's correction from its settings: the SMC
// with the Laplace start in the chart of every direction and on a
// fundamental domain of the family's symmetries (family.Symmetries:
// exchangeable sticks, zeppelins and tensors, the signs of a tensor's
// Cholesky columns), or importance sampling from q; the model classes;
// and the models corrected in every voxel (CorrectAlways).
func (ft *SelectFitter) setUpCorrection() error {
	method, err := correct.ParseMethod(ft.set.Correct)
	if err != nil {
		return fmt.Errorf("dmri: %w", err)
	}
	ft.cs = DefaultCorrectSettings(method)
	if method == correct.None {
		return nil
	}
	sf, ok := ft.fam.(family.Symmetric)
	if !ok {
		return fmt.Errorf("dmri: --correct needs a dMRI family that describes its symmetries; %s does not", ft.fam.Name())
	}
	sym := sf.Symmetries()
	if method == correct.SMC {
		// The mode search starts from every one of SelectDraws draws of
		// q: a network weak at model selection is weak at q(θ | M, x) for
		// the models it does not expect, and from a single start the
		// Newton search stops in a local mode (a wrong stick direction,
		// the ball's and a stick's diffusivities swapped) hundreds of nats
		// below the global one, misranking the classes (docs/dmri.md).
		ft.cs.Draws = SelectDraws
		ft.cs.Laplace = &correct.LaplaceOptions{Axes: sym.Axes, Groups: sym.Groups, Key: sf.ComponentKey, Signs: sym.Signs, Starts: SelectDraws}
		// As for ball-and-sticks (laplaceSettings): flag a voxel above a
		// log-evidence SE of 0.5 nats, the SE itself is a map.
		ft.cs.MaxLogEvidenceSE = 0.5
	}
	if ft.set.CorrectParticles > 0 {
		ft.cs.Particles = ft.set.CorrectParticles
	}
	comps := ft.fam.Components()
	ft.groups = sym.Groups
	if ft.sampled {
		ft.alwaysMasks = baseSubsets(ft.fam, ft.set.CorrectAlways, ft.set.Lambda)
		return nil
	}
	for _, m := range ft.masks {
		ft.class = append(ft.class, selectClass(m, sym.Groups))
		n := 0
		for k, on := range m {
			if on && comps[k].Kind == family.Base {
				n++
			}
		}
		ft.always = append(ft.always, n <= ft.set.CorrectAlways)
	}
	return nil
}

// selectClass is the key of mask m's class: the mask with the active
// components of every exchangeable group moved to the group's first
// positions (models equal up to relabelling them are one model).
func selectClass(m []bool, groups [][]int) string {
	c := append([]bool(nil), m...)
	for _, g := range groups {
		n := 0
		for _, k := range g {
			if m[k] {
				n++
			}
		}
		for i, k := range g {
			c[k] = i < n
		}
	}
	return family.MaskString(c)
}

// correctBatch corrects the voxels obs (the scan's voxels start, start+1,
// …): the candidates of voxel v are the models of every class holding at
// least CorrectMinQ of the network's probabilities probs[v] (or of its
// q(M | x, FitSettings.CorrectLambda)), of the network's most probable
// model's class, and of the classes corrected in every voxel
// (FitSettings.CorrectAlways). It overwrites probs[v] with
// the corrected model posterior (0 outside the candidates), fills a's
// correction maps, and returns S joint samples (masks, latent θ) per
// voxel from the corrected posteriors.
func (ft *SelectFitter) correctBatch(obs []posterior.Observation, so posterior.SampleOptions, probs [][]float32, a *Selection, start int) ([][][]bool, [][][]float64, error) {
	n, M := len(obs), len(ft.Models)
	var hi [][]float64 // q(M | x, CorrectLambda), nil without
	if ft.set.CorrectLambda > 0 {
		var err error
		if hi, err = ft.post.LogProbMasks(obs, ft.set.CorrectLambda, [][][]bool{ft.masks}, so.Options); err != nil {
			return nil, nil, fmt.Errorf("dmri: model posterior at the candidates' λ: %w", err)
		}
	}
	cands := make([][][]bool, n)
	pos := make([][]int, n)
	ph := make([]float32, M)
	for v := range n {
		p := probs[v]
		byClass := map[string]float64{}
		best := 0
		for m := range M {
			byClass[ft.class[m]] += float64(p[m])
			if p[m] > p[best] {
				best = m
			}
		}
		byClassHi := map[string]float64{}
		if hi != nil {
			normalise(hi[v], ph)
			for m := range M {
				byClassHi[ft.class[m]] += float64(ph[m])
			}
		}
		classes := map[string]bool{}
		for m := range M {
			c := ft.class[m]
			if byClass[c] >= CorrectMinQ || byClassHi[c] >= CorrectMinQ || c == ft.class[best] || ft.always[m] {
				cands[v] = append(cands[v], ft.masks[m])
				pos[v] = append(pos[v], m)
				classes[ft.class[m]] = true
			}
		}
		a.CorrClasses[start+v] = float32(len(classes))
	}
	corr, masks, thetas, err := ft.correctAndDraw(obs, cands, so, a, start)
	if err != nil {
		return nil, nil, err
	}
	for v := range n {
		clear(probs[v])
		for k, m := range pos[v] {
			probs[v][m] = float32(corr[v].Prob[k])
		}
	}
	return masks, thetas, nil
}

// correctAndDraw corrects the voxels obs over their candidates cands,
// records the most probable candidate's diagnostics in a's maps at at,
// at+1, …, and returns the corrected posteriors and Samples joint draws
// (masks, latent θ) per voxel from them.
func (ft *SelectFitter) correctAndDraw(obs []posterior.Observation, cands [][][]bool, so posterior.SampleOptions, a *Selection, at int) ([]correct.Corrected, [][][]bool, [][][]float64, error) {
	cs := ft.cs
	cs.Sample = so
	corr, err := correct.Correct(ft.post, obs, cands, ft.set.Lambda, cs)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("dmri: correction: %w", err)
	}
	masks := make([][][]bool, len(obs))
	thetas := make([][][]float64, len(obs))
	for v := range obs {
		c := &corr[v]
		g := at + v
		masks[v], thetas[v] = c.Draw(ft.set.Samples)
		r := c.Results[c.Best()]
		a.CorrESS[g], a.CorrSteps[g], a.CorrLogZSE[g] = float32(r.ESS), float32(r.Steps), float32(r.LogEvidenceSE)
		if c.Failed {
			a.CorrFailed[g] = 1
		}
	}
	return corr, masks, thetas, nil
}

// correctSampled is jointSamples with a correction for a family whose
// models are too many to list (a sampled fit, such as bszt-conv). The
// candidates of a voxel are the classes of its ModelDraws draws of
// q(M | x, λ) that hold at least CorrectMinQ of them (and likewise of
// draws at FitSettings.CorrectLambda), the class of the draw with the
// largest exact q, and the classes of at most CorrectAlways
// compartments, each expanded to all its masks (classMembers). The
// component, class and model probabilities are then the corrected
// posterior's, exact over the candidates; MAP is the bit code of the most
// probable candidate and ModelMass the network's q mass of the distinct
// draws at λ, as without a correction.
func (ft *SelectFitter) correctSampled(obs []posterior.Observation, start, at int, a *Selection) ([][][]bool, [][][]float64, error) {
	opt := posterior.Options{Seed: ft.set.Seed, Offset: uint64(start)}
	n, C, K := len(obs), a.Components, len(ft.Classes)
	D := ModelDraws
	dm, err := ft.drawModels(obs, D, opt)
	if err != nil {
		return nil, nil, err
	}
	var hi [][][]bool // draws at CorrectLambda, nil without
	if ft.set.CorrectLambda > 0 {
		if hi, err = ft.post.SampleMasksSupported(obs, ft.set.CorrectLambda, D, opt); err != nil {
			return nil, nil, fmt.Errorf("dmri: model posterior at the candidates' λ: %w", err)
		}
	}
	minDraws := int(math.Ceil(CorrectMinQ * float64(D)))
	cands := make([][][]bool, n)
	for v := range n {
		keys := map[string][]bool{} // class key → a mask of the class
		var order []string          // keys in first-seen order (deterministic candidates)
		add := func(m []bool) {
			c := selectClass(m, ft.groups)
			if _, ok := keys[c]; !ok {
				keys[c] = m
				order = append(order, c)
			}
		}
		for _, ds := range [][][]bool{dm.draws[v], hiOf(hi, v)} {
			count := map[string]int{}
			for _, m := range ds {
				count[selectClass(m, ft.groups)]++
			}
			for _, m := range ds {
				if count[selectClass(m, ft.groups)] >= minDraws {
					add(m)
				}
			}
		}
		a.ModelMass[at+v] = float32(dm.mass[v])
		add(dm.mapMask[v])
		for _, m := range ft.alwaysMasks {
			add(m)
		}
		for _, c := range order {
			cands[v] = append(cands[v], classMembers(keys[c], ft.groups)...)
		}
		// In increasing bit code, the model list's order: the SMC's
		// starts are drawn in candidate order, so a listed and a sampled
		// fit correcting the same masks give the same posterior.
		slices.SortFunc(cands[v], func(x, y []bool) int { return cmp.Compare(family.MaskCode(x), family.MaskCode(y)) })
		cands[v] = correct.Supported(ft.fam, cands[v], ft.set.Lambda)
		a.CorrClasses[at+v] = float32(len(order))
	}
	so := ft.so
	so.Options = opt
	corr, masks, thetas, err := ft.correctAndDraw(obs, cands, so, a, at)
	if err != nil {
		return nil, nil, err
	}
	for v := range n {
		c := &corr[v]
		g := at + v
		comp := a.CompProb[g*C : (g+1)*C]
		class := a.ClassProb[g*K : (g+1)*K]
		for k, m := range cands[v] {
			ft.addPresence(comp, class, m, float32(c.Prob[k]))
		}
		b := c.Best()
		a.MAP[g], a.MAPProb[g] = int32(family.MaskCode(cands[v][b])), float32(c.Prob[b])
	}
	return masks, thetas, nil
}

// hiOf returns voxel v's draws at the candidates' λ, nil without.
func hiOf(hi [][][]bool, v int) [][]bool {
	if hi == nil {
		return nil
	}
	return hi[v]
}

// distinctMasks returns the distinct masks of ms in first-seen order.
func distinctMasks(ms [][]bool) [][]bool {
	seen := map[uint32]bool{}
	var out [][]bool
	for _, m := range ms {
		if c := family.MaskCode(m); !seen[c] {
			seen[c] = true
			out = append(out, m)
		}
	}
	return out
}

// classMembers returns every mask of m's class (selectClass): m with the
// active components of each exchangeable group moved to every subset of
// the group's positions of the same size, in a fixed order.
func classMembers(m []bool, groups [][]int) [][]bool {
	out := [][]bool{append([]bool(nil), m...)}
	for _, g := range groups {
		n := 0
		for _, k := range g {
			if m[k] {
				n++
			}
		}
		if n == 0 || n == len(g) {
			continue
		}
		var next [][]bool
		for _, base := range out {
			for sub := range uint32(1) << len(g) {
				if bits.OnesCount32(sub) != n {
					continue
				}
				c := append([]bool(nil), base...)
				for i, k := range g {
					c[k] = sub>>i&1 == 1
				}
				next = append(next, c)
			}
		}
		out = next
	}
	return out
}

// baseSubsets returns the masks with positive prior probability at λ
// whose signal compartments (family.Base) number at most k, with any
// noise components: the classes a sampled fit corrects in every voxel
// (FitSettings.CorrectAlways).
func baseSubsets(f family.Family, k int, lambda float64) [][]bool {
	comps := f.Components()
	var base, other []int
	for i, c := range comps {
		if c.Kind == family.Base {
			base = append(base, i)
		} else {
			other = append(other, i)
		}
	}
	var out [][]bool
	var rec func(from int, m []bool, used int)
	rec = func(from int, m []bool, used int) {
		for sub := range uint32(1) << len(other) {
			c := append([]bool(nil), m...)
			for i, k := range other {
				c[k] = sub>>i&1 == 1
			}
			out = append(out, c)
		}
		if used == k {
			return
		}
		for i := from; i < len(base); i++ {
			m[base[i]] = true
			rec(i+1, m, used+1)
			m[base[i]] = false
		}
	}
	rec(0, make([]bool, len(comps)), 0)
	return correct.Supported(f, out, lambda)
}
