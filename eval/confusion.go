package eval

import (
	"fmt"
	"math"
	"sort"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/plot"
)

// Model-selection view of a family whose components fall into classes of
// exchangeable components (dMRI: ball, sticks, zeppelins, tensors, noise):
// on the test observations, the model posterior q(M | x, λ) over the whole
// enumerated model space is reduced to
//
//   - per component and per class, the presence probability P(k active | x)
//     (per class: P(any of its components | x)), classified at 0.5 against
//     the true mask: a 2×2 confusion matrix, accuracy, precision, recall,
//     F1;
//   - per model class (the signature: the number of active components of
//     each signal class, e.g. "Ball+2Stick", since models that differ only
//     by permuting exchangeable components have the same likelihood), the
//     signature probability Σ q(M | x, λ) over its masks: the confusion
//     matrix of the most probable signature, top-1/top-5 accuracy and
//     macro precision, recall and F1.
//
// The paper's BSZT table (PaperBSZT) classifies masks on a random
// 50-model subspace (ClassResult), which is not the same task; both are
// reported side by side.

// Presence is the binary classification of one component or class.
type Presence struct {
	Name string `json:"name"`
	// Support is the number of test observations in which it is active.
	Support int `json:"support"`
	// Confusion[t][p]: t, p = 0 absent, 1 present (truth, prediction
	// P(active | x) > 0.5).
	Confusion [2][2]float64 `json:"confusion"`
	Accuracy  Value         `json:"accuracy"`
	Precision Value         `json:"precision"`
	Recall    Value         `json:"recall"`
	F1        Value         `json:"f1"`
	// MeanProbTrue and MeanProbFalse are the mean P(active | x) where it
	// is and is not active.
	MeanProbTrue  Number `json:"mean_prob_present"`
	MeanProbFalse Number `json:"mean_prob_absent"`
}

// SelectionResult is the model-selection view of a report.
type SelectionResult struct {
	Models     int        `json:"models"`
	Obs        int        `json:"observations"`
	Components []Presence `json:"components"`
	Classes    []Presence `json:"classes"`
	// Signature classification.
	Signatures int         `json:"signatures"`
	Top1       Value       `json:"signature_top1"`
	Top5       Value       `json:"signature_top5"`
	Precision  Value       `json:"signature_macro_precision"`
	Recall     Value       `json:"signature_macro_recall"`
	F1         Value       `json:"signature_macro_f1"`
	Present    int         `json:"signatures_present"`
	Labels     []string    `json:"signature_labels"`
	Matrix     [][]float64 `json:"signature_confusion"`
	// PriorTop1 and PriorTop5 are the model-class accuracies of the
	// prior p(M | λ) alone (no data): the baseline the network must beat,
	// high for families whose prior favours small models (bszt's
	// dimension-penalised prior at small λ).
	PriorTop1 Value `json:"prior_signature_top1"`
	PriorTop5 Value `json:"prior_signature_top5"`
	// Paper is the paper's classification table for this family (nil when
	// it has none).
	Paper *PaperClassTable `json:"paper,omitempty"`
}

// PaperClassTable is a column of the paper's Table "Classification metrics
// across BSZT spaces" (macro-averaged, random 50-model subspace).
type PaperClassTable struct {
	Space     string  `json:"space"`
	Top1      float64 `json:"top1"`
	Top5      float64 `json:"top5"`
	Precision float64 `json:"macro_precision"`
	Recall    float64 `json:"macro_recall"`
	F1        float64 `json:"macro_f1"`
}

// PaperClassTables are the paper's values (tab:appendic_dmri_classifications_metrics_merged).
var PaperClassTables = map[string]PaperClassTable{
	"b3s":       {Space: "B3S space", Top1: 0.351, Top5: 0.933, Precision: 0.362, Recall: 0.351, F1: 0.337},
	"bszt":      {Space: "BSZT space", Top1: 0.428, Top5: 0.940, Precision: 0.404, Recall: 0.428, F1: 0.403},
	"bszt-conv": {Space: "BSZT + conv space", Top1: 0.422, Top5: 0.980, Precision: 0.420, Recall: 0.422, F1: 0.408},
}

// HasClasses reports whether some class of f holds more than one
// component, i.e. whether the model-selection view says more than the
// per-mask classification.
func HasClasses(classes []family.Class) bool {
	for _, c := range classes {
		if len(c.Components) > 1 {
			return true
		}
	}
	return false
}

// BinaryConfusion returns the 2×2 confusion matrix [truth][prediction] of
// the predictions prob[i] > threshold against truth[i].
func BinaryConfusion(truth []bool, prob []float64, threshold float64) ([2][2]float64, error) {
	var cm [2][2]float64
	if len(truth) != len(prob) {
		return cm, fmt.Errorf("eval: BinaryConfusion of %d labels and %d probabilities", len(truth), len(prob))
	}
	for i, t := range truth {
		ti, pi := 0, 0
		if t {
			ti = 1
		}
		if prob[i] > threshold {
			pi = 1
		}
		cm[ti][pi]++
	}
	return cm, nil
}

// BinaryScores returns accuracy and the precision, recall and F1 of the
// positive class of a 2×2 confusion matrix (0 where undefined: no
// positive prediction, no positive label, or precision + recall = 0).
func BinaryScores(cm [2][2]float64) (acc, prec, rec, f1 float64) {
	tn, fp, fn, tp := cm[0][0], cm[0][1], cm[1][0], cm[1][1]
	if n := tn + fp + fn + tp; n > 0 {
		acc = (tp + tn) / n
	}
	if tp+fp > 0 {
		prec = tp / (tp + fp)
	}
	if tp+fn > 0 {
		rec = tp / (tp + fn)
	}
	if prec+rec > 0 {
		f1 = 2 * prec * rec / (prec + rec)
	}
	return
}

// GroupProbs sums the probabilities p (over a model space) by group:
// out[g] = Σ_{m: group[m] = g} p[m].
func GroupProbs(p []float64, group []int, groups int) []float64 {
	out := make([]float64, groups)
	for m, v := range p {
		out[group[m]] += v
	}
	return out
}

// softmax returns exp(lq − max) normalised.
func softmax(lq []float64) []float64 {
	mx := lq[0]
	for _, v := range lq {
		mx = max(mx, v)
	}
	out := make([]float64, len(lq))
	var s float64
	for i, v := range lq {
		out[i] = math.Exp(v - mx)
		s += out[i]
	}
	for i := range out {
		out[i] /= s
	}
	return out
}

// SelectionMetrics computes the model-selection view from the true masks
// of n observations and their model posteriors probs[i] (normalised over
// space). Bootstrap standard errors use reps resamples with seed.
func SelectionMetrics(classes []family.Class, names []string, space [][]bool, truth [][]bool, probs [][]float64, reps int, seed uint64) (*SelectionResult, error) {
	n := len(truth)
	if n == 0 || len(probs) != n {
		return nil, fmt.Errorf("eval: selection metrics of %d masks and %d posteriors", n, len(probs))
	}
	for i, p := range probs {
		if len(p) != len(space) {
			return nil, fmt.Errorf("eval: observation %d has %d model probabilities for %d models", i, len(p), len(space))
		}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	val := func(f func(idx []int) float64) Value {
		return Value{f(all), Bootstrap(n, reps, seed, f)}
	}
	res := &SelectionResult{Models: len(space), Obs: n}
	presence := func(name string, active func(m []bool) bool) (Presence, error) {
		t := make([]bool, n)
		pr := make([]float64, n)
		var sumT, sumF float64
		for i := range n {
			t[i] = active(truth[i])
			for m, q := range probs[i] {
				if active(space[m]) {
					pr[i] += q
				}
			}
		}
		cm, err := BinaryConfusion(t, pr, 0.5)
		if err != nil {
			return Presence{}, err
		}
		ps := Presence{Name: name, Confusion: cm}
		for i := range n {
			if t[i] {
				ps.Support++
				sumT += pr[i]
			} else {
				sumF += pr[i]
			}
		}
		ps.MeanProbTrue, ps.MeanProbFalse = Number(math.NaN()), Number(math.NaN())
		if ps.Support > 0 {
			ps.MeanProbTrue = Number(sumT / float64(ps.Support))
		}
		if ps.Support < n {
			ps.MeanProbFalse = Number(sumF / float64(n-ps.Support))
		}
		score := func(k int) func(idx []int) float64 {
			return func(idx []int) float64 {
				cm, _ := BinaryConfusion(pick(t, idx), pick(pr, idx), 0.5)
				a, p, r, f := BinaryScores(cm)
				return [4]float64{a, p, r, f}[k]
			}
		}
		ps.Accuracy, ps.Precision, ps.Recall, ps.F1 = val(score(0)), val(score(1)), val(score(2)), val(score(3))
		return ps, nil
	}
	for k, name := range names {
		ps, err := presence(name, func(m []bool) bool { return m[k] })
		if err != nil {
			return nil, err
		}
		res.Components = append(res.Components, ps)
	}
	for _, cl := range classes {
		ps, err := presence(cl.Name, func(m []bool) bool {
			for _, k := range cl.Components {
				if m[k] {
					return true
				}
			}
			return false
		})
		if err != nil {
			return nil, err
		}
		res.Classes = append(res.Classes, ps)
	}

	// Signatures: every signature of the space, sorted by name.
	sigOf := make([]string, len(space))
	seen := map[string]bool{}
	for m, mask := range space {
		sigOf[m] = family.Signature(mask, classes)
		if !seen[sigOf[m]] {
			seen[sigOf[m]] = true
			res.Labels = append(res.Labels, sigOf[m])
		}
	}
	sort.Strings(res.Labels)
	index := map[string]int{}
	for i, l := range res.Labels {
		index[l] = i
	}
	group := make([]int, len(space))
	for m := range space {
		group[m] = index[sigOf[m]]
	}
	K := len(res.Labels)
	scores := make([][]float64, n)
	truthSig := make([]int, n)
	pred := make([]int, n)
	for i := range n {
		sig := family.Signature(truth[i], classes)
		t, ok := index[sig]
		if !ok {
			return nil, fmt.Errorf("eval: observation %d has the signature %s, which no model of the space has", i, sig)
		}
		truthSig[i] = t
		scores[i] = GroupProbs(probs[i], group, K)
		best := 0
		for c, v := range scores[i] {
			if v > scores[i][best] {
				best = c
			}
		}
		pred[i] = best
	}
	cm, err := Confusion(truthSig, pred, K)
	if err != nil {
		return nil, err
	}
	res.Signatures, res.Matrix = K, cm
	res.Top1 = val(func(idx []int) float64 { return TopKAccuracy(pick(scores, idx), pick(truthSig, idx), 1) })
	res.Top5 = val(func(idx []int) float64 { return TopKAccuracy(pick(scores, idx), pick(truthSig, idx), 5) })
	macro := func(idx []int) Scores {
		cm, _ := Confusion(pick(truthSig, idx), pick(pred, idx), K)
		return MacroScores(cm)
	}
	res.Precision = val(func(idx []int) float64 { return macro(idx).Precision })
	res.Recall = val(func(idx []int) float64 { return macro(idx).Recall })
	res.F1 = val(func(idx []int) float64 { return macro(idx).F1 })
	res.Present = MacroScores(cm).Classes
	return res, nil
}

// selection computes the model-selection view on the run's test
// observations (families whose model space has at most 4096 masks and a
// class of several components; nil otherwise).
func (r *run) selection() (*SelectionResult, error) {
	classes := family.ComponentClasses(r.f)
	if !HasClasses(classes) {
		return nil, nil
	}
	space := modelSpace(r.f, 4096)
	if space == nil {
		return nil, nil
	}
	r.progress("model selection: scoring all %d models for %d observations", len(space), len(r.obs))
	lq, err := r.logProbMasks(r.obs, r.lams, [][][]bool{space})
	if err != nil {
		return nil, err
	}
	probs := make([][]float64, len(lq))
	truth := make([][]bool, len(lq))
	for i := range lq {
		probs[i] = softmax(lq[i])
		truth[i] = r.sims[i].Mask
	}
	prior := r.f.MaskPrior()
	priorProbs := make([][]float64, len(lq))
	for i := range lq {
		lp := make([]float64, len(space))
		for m, mask := range space {
			lp[m] = prior.LogProb(mask, r.lams[i])
		}
		priorProbs[i] = softmax(lp)
	}
	var names []string
	for _, c := range r.f.Components() {
		names = append(names, c.Name)
	}
	res, err := SelectionMetrics(classes, names, space, truth, probs, r.cfg.BootReps, r.seed(streamBoot))
	if err != nil {
		return nil, err
	}
	base, err := SelectionMetrics(classes, names, space, truth, priorProbs, r.cfg.BootReps, r.seed(streamBoot))
	if err != nil {
		return nil, err
	}
	res.PriorTop1, res.PriorTop5 = base.Top1, base.Top5
	if t, ok := PaperClassTables[r.f.Name()]; ok {
		res.Paper = &t
	}
	return res, nil
}

// rows flattens the model-selection view for summary.csv (nil-safe).
func (s *SelectionResult) rows(set string) []Row {
	if s == nil {
		return nil
	}
	var rows []Row
	val := func(name string, v Value, setting string) {
		rows = append(rows, Row{name, v.Value, setting}, Row{name + "_se", v.SE, setting})
	}
	sig := fmt.Sprintf("%s,signatures=%d", set, s.Signatures)
	val("signature_top1", s.Top1, sig)
	val("signature_top5", s.Top5, sig)
	val("signature_macro_precision", s.Precision, sig)
	val("signature_macro_recall", s.Recall, sig)
	val("signature_macro_f1", s.F1, sig)
	val("prior_signature_top1", s.PriorTop1, sig)
	val("prior_signature_top5", s.PriorTop5, sig)
	for _, group := range [][]Presence{s.Components, s.Classes} {
		for _, p := range group {
			st := fmt.Sprintf("%s,component=%s", set, p.Name)
			val("presence_accuracy", p.Accuracy, st)
			val("presence_precision", p.Precision, st)
			val("presence_recall", p.Recall, st)
			val("presence_f1", p.F1, st)
		}
	}
	if t := s.Paper; t != nil {
		st := "paper," + t.Space + ",models=50"
		rows = append(rows, Row{"top1", t.Top1, st}, Row{"top5", t.Top5, st}, Row{"macro_precision", t.Precision, st},
			Row{"macro_recall", t.Recall, st}, Row{"macro_f1", t.F1, st})
	}
	return rows
}

// plot writes the row-normalised signature confusion matrix (nil-safe).
func (s *SelectionResult) plot(path string) error {
	if s == nil {
		return nil
	}
	rows := make([][]float64, len(s.Matrix))
	for i, row := range s.Matrix {
		var sum float64
		for _, v := range row {
			sum += v
		}
		rows[i] = make([]float64, len(row))
		for j, v := range row {
			if sum > 0 {
				rows[i][j] = v / sum
			}
		}
	}
	o := plot.Options{Title: fmt.Sprintf("model-class confusion (row-normalised), top-1 %.3f", s.Top1.Value), XLabel: "predicted model class", YLabel: "true model class"}
	if err := plot.ConfusionMatrix(path, rows, s.Labels, s.Labels, o); err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	return nil
}
