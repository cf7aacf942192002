package eval

import "fmt"

// Confusion returns the k×k confusion matrix (rows: true class, columns:
// predicted class) of labels in 0…k−1.
func Confusion(truth, pred []int, k int) ([][]float64, error) {
	if len(truth) != len(pred) {
		return nil, fmt.Errorf("eval: Confusion of %d true and %d predicted labels", len(truth), len(pred))
	}
	m := make([][]float64, k)
	for i := range m {
		m[i] = make([]float64, k)
	}
	for i := range truth {
		if truth[i] < 0 || truth[i] >= k || pred[i] < 0 || pred[i] >= k {
			return nil, fmt.Errorf("eval: Confusion label (%d, %d) outside 0…%d", truth[i], pred[i], k-1)
		}
		m[truth[i]][pred[i]]++
	}
	return m, nil
}

// TopKAccuracy returns the fraction of observations whose true class is
// among the k highest scores (ties broken towards lower index). scores[i]
// holds one score per class for observation i.
func TopKAccuracy(scores [][]float64, truth []int, k int) float64 {
	hit := 0
	for i, s := range scores {
		t := truth[i]
		better := 0
		for c, v := range s {
			if v > s[t] || (v == s[t] && c < t) {
				better++
			}
		}
		if better < k {
			hit++
		}
	}
	return float64(hit) / float64(len(scores))
}

// Scores are macro-averaged classification scores.
type Scores struct {
	Precision, Recall, F1 float64
	// Classes is the number of classes averaged over: those that occur
	// among the true labels.
	Classes int
}

// MacroScores returns precision, recall and F1 of each class from a
// confusion matrix (rows true, columns predicted), averaged uniformly over
// the classes that occur among the true labels (as scikit-learn does with
// labels restricted to those present). A class never predicted has
// precision 0; F1 is 0 when precision + recall is 0.
func MacroScores(cm [][]float64) Scores {
	var s Scores
	for c := range cm {
		tp, support, predicted := cm[c][c], 0.0, 0.0
		for j := range cm {
			support += cm[c][j]
			predicted += cm[j][c]
		}
		if support == 0 {
			continue
		}
		p := 0.0
		if predicted > 0 {
			p = tp / predicted
		}
		r := tp / support
		f := 0.0
		if p+r > 0 {
			f = 2 * p * r / (p + r)
		}
		s.Precision += p
		s.Recall += r
		s.F1 += f
		s.Classes++
	}
	if s.Classes > 0 {
		n := float64(s.Classes)
		s.Precision /= n
		s.Recall /= n
		s.F1 /= n
	}
	return s
}
