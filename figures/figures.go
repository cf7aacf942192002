// Package figures draws the figures of posterior results with package
// plot: the model posterior as bars, the parameters of the most frequent
// model as a pair plot, the model posterior across λ and a predictive
// band against its observation. The commands (`prism sample`, `select`,
// `lambda-sweep`, `predict`) and the demo draw their figures with it.
package figures

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/plot"
	"github.com/prismsbi/prism/posterior"
)

// ModelPosterior plots q(M | x, λ) and the sample frequency of the ranked models.
func ModelPosterior(path string, f family.Family, rs []posterior.Ranked, title string) error {
	labels := make([]string, len(rs))
	q, fr := make([]float64, len(rs)), make([]float64, len(rs))
	for i, r := range rs {
		labels[i] = family.MaskLabel(f, r.Mask)
		q[i], fr[i] = math.Exp(r.LogQ), r.Frequency
	}
	series := []plot.Series{{Name: "q(M | x, λ)", Values: q}}
	if rs[0].Count > 0 {
		series = append(series, plot.Series{Name: "sample frequency", Values: fr})
	}
	return plot.ModelBars(path, labels, series, plot.Options{Title: title, XLabel: "posterior probability"})
}

// JointParams draws the natural parameters of the most frequent model
// among the joint samples js (a pair plot needs one parameter set), with
// the truth (a simulated observation's mask and parameters; nil truth:
// none) marked where it is that model. At most 12 parameters are shown.
func JointParams(path string, p *posterior.Posterior, js posterior.JointSet, truth []bool, truthTheta family.Params) error {
	f := p.Family()
	count := map[string]int{}
	best := ""
	var bestMask []bool
	for _, m := range js.Masks {
		k := family.MaskString(m)
		count[k]++
		if count[k] > count[best] {
			best, bestMask = k, m
		}
	}
	var names []string
	var rows [][]float64
	for j, th := range js.Theta {
		if family.MaskString(js.Masks[j]) != best {
			continue
		}
		names = names[:0]
		row := flattenParams(f, p.Natural(th, js.Masks[j]), &names)
		rows = append(rows, row)
	}
	if len(names) == 0 {
		return nil // the model has no parameters
	}
	if len(names) > 12 {
		names, rows = names[:12], truncateRows(rows, 12)
	}
	o := plot.PairOptions{Options: plot.Options{Title: fmt.Sprintf("parameters under %s (%d of %d samples)", family.MaskLabel(f, bestMask), len(rows), len(js.Theta))}}
	if truth != nil && family.MaskString(truth) == best && truthTheta.Components != nil {
		var tn []string
		o.Truth = flattenParams(f, truthTheta, &tn)
		if len(o.Truth) > len(names) {
			o.Truth = o.Truth[:len(names)]
		}
	}
	return plot.PairPlot(path, names, rows, o)
}

func truncateRows(rows [][]float64, k int) [][]float64 {
	for i := range rows {
		rows[i] = rows[i][:k]
	}
	return rows
}

// flattenParams lists natural parameters in a fixed order: fractions,
// shared parameters, then components by index and parameter order.
func flattenParams(f family.Family, pr family.Params, names *[]string) []float64 {
	var v []float64
	for i, x := range pr.Fractions {
		*names = append(*names, fmt.Sprintf("f%d", i))
		v = append(v, x)
	}
	for _, sp := range f.Layout().Shared {
		if x, ok := pr.Shared[sp.Name]; ok {
			*names = append(*names, sp.Name)
			v = append(v, x)
		}
	}
	for k, c := range f.Components() {
		ps, ok := pr.Components[k]
		if !ok {
			continue
		}
		for _, par := range c.Params {
			if x, ok := ps[par.Name]; ok {
				*names = append(*names, c.Name+"."+par.Name)
				v = append(v, x)
			}
		}
	}
	return v
}

// LambdaSweep draws the number of active components (median, 5–95 %)
// against λ and q(M | x, λ) of the models that rank highest at some λ.
func LambdaSweep(path string, f family.Family, sw *posterior.Sweep, title string) error {
	s := plot.Sweep{Lambda: sw.Lambdas, CenterName: "median", Center: sw.ActiveMedian, Lo: sw.ActiveQ05, Hi: sw.ActiveQ95}
	for k, m := range sw.Shown {
		s.Models = append(s.Models, plot.Series{Name: family.MaskLabel(f, m), Values: sw.ShownProb[k]})
	}
	return plot.LambdaSweep(path, s, plot.Options{Title: title})
}

// Axis returns the abscissa of each measurement of design d, its
// covariate for a 1-D design or else its index, and the axis label ("x"
// or "measurement").
func Axis(d family.Design) (x []float64, label string) {
	x = make([]float64, d.N)
	label = "measurement"
	for j := range x {
		x[j] = float64(j)
		if d.CovDim == 1 {
			x[j] = d.Cov[j]
			label = "x"
		}
	}
	return x, label
}
