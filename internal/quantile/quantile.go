// Package quantile holds prism's one definition of a sample quantile:
// linear interpolation between order statistics, x_(⌊h⌋) + (h − ⌊h⌋)·
// (x_(⌊h⌋+1) − x_(⌊h⌋)) with h = q·(n − 1) on the sorted sample (Hyndman
// and Fan's type 7, the default of R and numpy), so that medians and
// bands mean the same in every output.
package quantile

import (
	"math"
	"slices"
)

// Sorted returns the q-quantile (0 ≤ q ≤ 1) of x, which must be sorted
// increasingly and non-empty.
func Sorted(x []float64, q float64) float64 {
	h := q * float64(len(x)-1)
	lo := int(math.Floor(h))
	if lo >= len(x)-1 {
		return x[len(x)-1]
	}
	return x[lo] + (h-float64(lo))*(x[lo+1]-x[lo])
}

// Of returns the q-quantile of the non-NaN values of x (x is not
// modified), or NaN when there are none.
func Of(x []float64, q float64) float64 {
	s := make([]float64, 0, len(x))
	for _, v := range x {
		if !math.IsNaN(v) {
			s = append(s, v)
		}
	}
	if len(s) == 0 {
		return math.NaN()
	}
	slices.Sort(s)
	return Sorted(s, q)
}

// Median is Of(x, 0.5): the middle value, or the mean of the two middle
// values.
func Median(x []float64) float64 { return Of(x, 0.5) }
