package dmrifit

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
)

// Model-selection phantom (`prism dmri phantom`): voxels built from known
// compartments with white-matter-like parameters, Rician noise at a given
// SNR, and b0 normalisation as LoadScan does; a network's model posterior
// should put its largest mass on the true model class.

// PhantomClasses are the phantom's model classes, as family.Signature
// names them.
var PhantomClasses = []string{"Ball+Stick", "Ball+Zeppelin", "Ball+2Stick", "Tensor"}

// phantomSignal returns the noise-free signal of class c at every
// measurement of d for parameters drawn from r (S0 = 1): ball d ~ U(0.8,
// 3)·10⁻³; stick d ~ U(1.5, 2.2)·10⁻³; zeppelin d∥ ~ U(1.5, 2.2)·10⁻³, d⊥ ~
// U(0.2, 0.6)·10⁻³; tensor eigenvalues U(1.4, 2), U(0.5, 0.9), U(0.2,
// 0.4) ·10⁻³ mm²/s with a random orientation; ball fraction U(0.2, 0.5);
// two sticks cross at ≥ 60° and share the rest as U(0.5, 0.7) : rest.
func phantomSignal(r *rand.Rand, c string, d family.Design) ([]float64, error) {
	u := func(a, b float64) float64 { return (a + (b-a)*r.Float64()) * 1e-3 }
	fBall := 0.2 + 0.3*r.Float64()
	out := make([]float64, d.N)
	switch c {
	case "Ball+Stick":
		db, ds, n := u(0.8, 3), u(1.5, 2.2), randomAxis(r)
		for j := range d.N {
			b, g := gradRow(d, j)
			out[j] = fBall*ballSignal(b, db) + (1-fBall)*stickSignal(b, g, n, ds)
		}
	case "Ball+Zeppelin":
		db, dp, dq, n := u(0.8, 3), u(1.5, 2.2), u(0.2, 0.6), randomAxis(r)
		for j := range d.N {
			b, g := gradRow(d, j)
			out[j] = fBall*ballSignal(b, db) + (1-fBall)*zeppelinSignal(b, g, n, dp, dq)
		}
	case "Ball+2Stick":
		db, d1, d2 := u(0.8, 3), u(1.5, 2.2), u(1.5, 2.2)
		n1 := randomAxis(r)
		var n2 [3]float64
		for {
			n2 = randomAxis(r)
			if math.Abs(n1[0]*n2[0]+n1[1]*n2[1]+n1[2]*n2[2]) <= 0.5 { // ≥ 60°
				break
			}
		}
		s := 0.5 + 0.2*r.Float64()
		f1, f2 := (1-fBall)*s, (1-fBall)*(1-s)
		for j := range d.N {
			b, g := gradRow(d, j)
			out[j] = fBall*ballSignal(b, db) + f1*stickSignal(b, g, n1, d1) + f2*stickSignal(b, g, n2, d2)
		}
	case "Tensor":
		l := [3]float64{u(1.4, 2), u(0.5, 0.9), u(0.2, 0.4)}
		e1 := randomAxis(r)
		e2 := perpendicular(r, e1)
		e3 := [3]float64{e1[1]*e2[2] - e1[2]*e2[1], e1[2]*e2[0] - e1[0]*e2[2], e1[0]*e2[1] - e1[1]*e2[0]}
		var D [3][3]float64
		for a := range 3 {
			for b := range 3 {
				D[a][b] = l[0]*e1[a]*e1[b] + l[1]*e2[a]*e2[b] + l[2]*e3[a]*e3[b]
			}
		}
		for j := range d.N {
			b, g := gradRow(d, j)
			out[j] = tensorSignal(b, g, D)
		}
	default:
		return nil, fmt.Errorf("dmri: unknown phantom class %q (want one of %v)", c, PhantomClasses)
	}
	return out, nil
}

// The compartment signals, written out here rather than taken from the
// family (S/S0 at b-value b, unit gradient g, diffusivities in mm²/s).
func ballSignal(b, d float64) float64 { return math.Exp(-b * d) }

func stickSignal(b float64, g, n [3]float64, d float64) float64 {
	c := g[0]*n[0] + g[1]*n[1] + g[2]*n[2]
	return math.Exp(-b * d * c * c)
}

func zeppelinSignal(b float64, g, n [3]float64, dPar, dPerp float64) float64 {
	c := g[0]*n[0] + g[1]*n[1] + g[2]*n[2]
	return math.Exp(-b * (dPar*c*c + dPerp*(1-c*c)))
}

func tensorSignal(b float64, g [3]float64, D [3][3]float64) float64 {
	var q float64
	for i := range 3 {
		for j := range 3 {
			q += g[i] * D[i][j] * g[j]
		}
	}
	return math.Exp(-b * q)
}

func gradRow(d family.Design, j int) (float64, [3]float64) {
	r := d.Row(j)
	return r[0], [3]float64{r[1], r[2], r[3]}
}

func randomAxis(r *rand.Rand) [3]float64 {
	for {
		v := [3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		if n := math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2]); n > 1e-6 {
			return [3]float64{v[0] / n, v[1] / n, v[2] / n}
		}
	}
}

// perpendicular returns a random unit vector orthogonal to e.
func perpendicular(r *rand.Rand, e [3]float64) [3]float64 {
	for {
		v := randomAxis(r)
		c := v[0]*e[0] + v[1]*e[1] + v[2]*e[2]
		w := [3]float64{v[0] - c*e[0], v[1] - c*e[1], v[2] - c*e[2]}
		if n := math.Sqrt(w[0]*w[0] + w[1]*w[1] + w[2]*w[2]); n > 1e-3 {
			return [3]float64{w[0] / n, w[1] / n, w[2] / n}
		}
	}
}

// PhantomVoxels returns n voxels of class c on design d at the given SNR
// (Rician magnitude noise σ = 1/snr relative to S0 = 1), each divided by
// the mean of its b ≤ BZero measurements as LoadScan does: x[v*d.N+j].
// Voxel v of class c uses the random stream (seed, class index, v).
func PhantomVoxels(c string, d family.Design, n int, snr float64, seed uint64) ([]float64, error) {
	ci := -1
	for i, name := range PhantomClasses {
		if name == c {
			ci = i
		}
	}
	if ci < 0 {
		return nil, fmt.Errorf("dmri: unknown phantom class %q (want one of %v)", c, PhantomClasses)
	}
	if !(snr > 0) {
		return nil, fmt.Errorf("dmri: SNR %v, want > 0", snr)
	}
	var b0 []int
	for j := range d.N {
		if d.Row(j)[0] <= BZero {
			b0 = append(b0, j)
		}
	}
	if len(b0) == 0 {
		return nil, fmt.Errorf("dmri: the design has no b ≤ %v volume to normalise by", BZero)
	}
	sigma := 1 / snr
	out := make([]float64, 0, n*d.N)
	for v := range n {
		r := rand.New(rand.NewPCG(seed^0x7068616e746f6d, uint64(ci)<<32|uint64(v))) // "phantom"
		s, err := phantomSignal(r, c, d)
		if err != nil {
			return nil, err
		}
		for j := range s {
			re, im := s[j]+sigma*r.NormFloat64(), sigma*r.NormFloat64()
			s[j] = math.Hypot(re, im)
		}
		var m float64
		for _, j := range b0 {
			m += s[j]
		}
		m /= float64(len(b0))
		for j := range s {
			s[j] /= m
		}
		out = append(out, s...)
	}
	return out, nil
}

// PhantomResult is the model-selection outcome for one phantom class.
type PhantomResult struct {
	Class string `json:"class"`
	N     int    `json:"voxels"`
	// Right is the fraction of voxels whose most probable model class
	// (signature, over every model of the family) is the true one, and
	// RightSE its binomial standard error; RightAmong is the same among
	// the phantom's classes only.
	Right      float64 `json:"right"`
	RightSE    float64 `json:"right_se"`
	RightAmong float64 `json:"right_among_phantom_classes"`
	// MeanProb is the mean posterior probability of the true class.
	MeanProb float64 `json:"mean_prob_true_class"`
	// Predicted counts the most probable class over all signatures.
	Predicted map[string]int `json:"predicted"`
	// With a correction: the voxels whose correction failed its
	// diagnostics and the mean number of model classes corrected.
	CorrectFailed  int     `json:"correct_failed,omitempty"`
	CorrectClasses float64 `json:"mean_correct_classes,omitempty"`
}

// SelectionPhantom simulates perClass voxels of every phantom class on
// design d at snr and classifies them with the network's model posterior
// q(M | x, λ) over the family's model list, summed per signature. With
// fit (nil for none) naming a correction (FitSettings.Correct), the
// model posterior is the corrected one of a `dmri fit` with those
// settings (SelectFitter; fit.Lambda is replaced by lambda), the voxels
// of class i taking the random streams of scan voxels i·perClass, ….
//
// A family of more components than MaxListedComponents (bszt-conv) has
// no model list: its voxels are classified as a sampled `dmri fit`
// classifies them (sampledPhantomClass).
func SelectionPhantom(p *posterior.Posterior, d family.Design, perClass int, snr, lambda float64, seed uint64, fit *FitSettings) ([]PhantomResult, error) {
	f := p.Family()
	classes := family.ComponentClasses(f)
	if err := checkPhantomClasses(f, classes); err != nil {
		return nil, err
	}
	if fit != nil {
		if err := fit.ResolveCorrect(false).CheckScope(f); err != nil {
			return nil, err
		}
	}
	if len(f.Components()) > MaxListedComponents {
		s := DefaultFitSettings()
		s.Correct = "none"
		if fit != nil {
			s = *fit
		}
		s.Lambda, s.Seed, s.Samples = lambda, seed, ModelDraws
		ft, err := NewSelectFitter(p, s)
		if err != nil {
			return nil, err
		}
		return phantomResults(d, perClass, snr, seed, ft.sampledPhantomClass)
	}
	var ft *SelectFitter
	if fit != nil && correctKey(fit.Correct) != "" {
		s := *fit
		s.Lambda = lambda
		var err error
		if ft, err = NewSelectFitter(p, s); err != nil {
			return nil, err
		}
	}
	models, err := ModelList(f, lambda)
	if err != nil {
		return nil, err
	}
	masks := make([][]bool, len(models))
	sig := make([]string, len(models))
	for m, mod := range models {
		masks[m] = mod.Mask
		sig[m] = family.Signature(mod.Mask, classes)
	}
	return phantomResults(d, perClass, snr, seed, func(ci int, obs []posterior.Observation, res *PhantomResult) ([]map[string]float64, error) {
		lq, err := p.LogProbMasks(obs, lambda, [][][]bool{masks}, posterior.Options{Seed: seed})
		if err != nil {
			return nil, err
		}
		ps := make([]map[string]float64, len(obs))
		if ft == nil {
			// Signature probabilities in float64 (log-sum-exp over models).
			for v := range obs {
				ps[v] = map[string]float64{}
				mx := math.Inf(-1)
				for _, l := range lq[v] {
					mx = math.Max(mx, l)
				}
				var z float64
				for m, s := range sig {
					w := math.Exp(lq[v][m] - mx)
					ps[v][s] += w
					z += w
				}
				for s := range ps[v] {
					ps[v][s] /= z
				}
			}
			return ps, nil
		}
		probs := make([][]float32, len(obs))
		for v := range probs {
			probs[v] = make([]float32, len(models))
			normalise(lq[v], probs[v])
		}
		a := ft.newSelection(len(obs), d.N)
		so := ft.so
		so.Options = posterior.Options{Seed: ft.set.Seed, Offset: uint64(ci * len(obs))}
		if _, _, err := ft.correctBatch(obs, so, probs, a, 0); err != nil {
			return nil, err
		}
		res.addCorrection(a)
		for v := range obs {
			ps[v] = map[string]float64{}
			for m, s := range sig {
				ps[v][s] += float64(probs[v][m])
			}
		}
		return ps, nil
	})
}

// phantomResults simulates perClass voxels of every phantom class and
// counts them by the signature probabilities that classify returns for
// the voxels obs of phantom class ci (classify may add the correction's
// diagnostics to res).
func phantomResults(d family.Design, perClass int, snr float64, seed uint64, classify func(ci int, obs []posterior.Observation, res *PhantomResult) ([]map[string]float64, error)) ([]PhantomResult, error) {
	var out []PhantomResult
	for ci, c := range PhantomClasses {
		x, err := PhantomVoxels(c, d, perClass, snr, seed)
		if err != nil {
			return nil, err
		}
		obs := make([]posterior.Observation, perClass)
		for v := range obs {
			obs[v] = posterior.Observation{Design: d, X: x[v*d.N : (v+1)*d.N]}
		}
		res := PhantomResult{Class: c, N: perClass, Predicted: map[string]int{}}
		ps, err := classify(ci, obs, &res)
		if err != nil {
			return nil, fmt.Errorf("dmri: phantom %s: %w", c, err)
		}
		for _, p := range ps {
			res.add(p)
		}
		n := float64(perClass)
		res.Right /= n
		res.RightAmong /= n
		res.MeanProb /= n
		res.RightSE = math.Sqrt(res.Right * (1 - res.Right) / n)
		out = append(out, res)
	}
	return out, nil
}

// add counts one voxel of the result's class whose signature
// probabilities are ps.
func (res *PhantomResult) add(ps map[string]float64) {
	c := res.Class
	best := ""
	for s, v := range ps {
		if best == "" || v > ps[best] || (v == ps[best] && s < best) {
			best = s
		}
	}
	// Right among the phantom classes only when strictly most probable.
	among := true
	for _, s := range PhantomClasses {
		if s != c && ps[s] >= ps[c] {
			among = false
		}
	}
	if among {
		res.RightAmong++
	}
	res.Predicted[best]++
	if best == c {
		res.Right++
	}
	res.MeanProb += ps[c]
}

// addCorrection records the correction diagnostics of the selection a of
// the result's voxels: failed voxels and the mean number of classes
// corrected.
func (res *PhantomResult) addCorrection(a *Selection) {
	for v := range a.N {
		if a.CorrFailed[v] == 1 {
			res.CorrectFailed++
		}
		res.CorrectClasses += float64(a.CorrClasses[v]) / float64(a.N)
	}
}

// sampledPhantomClass classifies the voxels obs of phantom class ci for a
// fitter whose models are too many to list: a signature's probability in
// a voxel is its frequency among the fitter's Samples (ModelDraws) joint
// draws — of q(M | x, λ), or of the corrected posterior with a
// correction — exactly the draws a sampled `dmri fit` summarises
// (SelectFitter.jointSamples; the voxels of class ci take the random
// streams of scan voxels ci·len(obs), …).
func (ft *SelectFitter) sampledPhantomClass(ci int, obs []posterior.Observation, res *PhantomResult) ([]map[string]float64, error) {
	n := len(obs)
	ids := make([]int, n)
	for v := range ids {
		ids[v] = ci*n + v
	}
	a := ft.newSelection(n, obs[0].Design.N)
	masks, _, err := ft.jointSamples(obs, ids, ci*n, 0, a)
	if err != nil {
		return nil, err
	}
	if a.CorrFailed != nil {
		res.addCorrection(a)
	}
	ps := make([]map[string]float64, n)
	for v, ms := range masks {
		ps[v] = map[string]float64{}
		for _, m := range ms {
			ps[v][family.Signature(m, ft.Classes)] += 1 / float64(len(ms))
		}
	}
	return ps, nil
}

// checkPhantomClasses returns an error unless family f, of component
// classes classes, can form every phantom class's signature.
func checkPhantomClasses(f family.Family, classes []Class) error {
	for _, c := range PhantomClasses {
		if !hasSignature(classes, c) {
			return fmt.Errorf("dmri: %s has no model of the phantom class %s (it needs ball, stick, zeppelin and tensor compartments, like bszt)", f.Name(), c)
		}
	}
	return nil
}

// hasSignature reports whether a mask over classes can have signature
// sig (family.Signature): every part "Name" or "kName" names a non-noise
// class of at least k components.
func hasSignature(classes []Class, sig string) bool {
	for _, part := range strings.Split(sig, "+") {
		k, name := 1, part
		if i := strings.IndexFunc(part, func(r rune) bool { return r < '0' || r > '9' }); i > 0 {
			k, _ = strconv.Atoi(part[:i])
			name = part[i:]
		}
		found := false
		for _, cl := range classes {
			if cl.Name == name && !cl.Noise && len(cl.Components) >= k {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
