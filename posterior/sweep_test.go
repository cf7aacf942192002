package posterior

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prismsbi/prism/family"
)

// TestActiveSummary compares the mean and weighted quantiles of the active
// component counts with the quantiles of the expanded list of draws
// (smallest value whose cumulative count reaches q·n), on random rankings.
func TestActiveSummary(t *testing.T) {
	f, err := family.Lookup("symbolic-k15")
	if err != nil {
		t.Fatal(err)
	}
	c := len(f.Components())
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		var rs []Ranked
		var all []float64
		for range 1 + r.IntN(8) {
			m := make([]bool, c)
			for k := range m {
				m[k] = r.IntN(3) == 0
			}
			cnt := 1 + r.IntN(20)
			rs = append(rs, Ranked{Mask: m, Count: cnt})
			for range cnt {
				all = append(all, float64(family.BaseCount(f, m)))
			}
		}
		slices.Sort(all)
		q := func(p float64) float64 { return all[max(0, int(math.Ceil(p*float64(len(all))))-1)] }
		mean, lo, med, hi := activeSummary(f, rs)
		sum := 0.0
		for _, a := range all {
			sum += a
		}
		// The mean of small integers: exact up to summation order.
		if math.Abs(mean-sum/float64(len(all))) > 1e-12 {
			t.Fatalf("trial %d: mean %v, expanded %v", trial, mean, sum/float64(len(all)))
		}
		if lo != q(0.05) || med != q(0.5) || hi != q(0.95) {
			t.Fatalf("trial %d: quantiles %v %v %v, expanded %v %v %v", trial, lo, med, hi, q(0.05), q(0.5), q(0.95))
		}
	}
}
