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

// TestSweepShownKeepsEachEndsWinner: the figure's models are chosen by
// their peak probability over the grid, so a model that dominates only at
// the last λ is kept even when the winners of the first λ values alone
// would fill the list (the symbolic-k50 sweep of session 24 drew "other"
// over a model holding 66 % at λ = 1).
func TestSweepShownKeepsEachEndsWinner(t *testing.T) {
	// Candidates 0–5 win λ index 0–5 with a small probability each;
	// candidate 6 wins the last λ with 0.66; candidate 7 never wins.
	prob := [][]float64{
		{0.15, 0, 0, 0, 0, 0, 0},
		{0, 0.02, 0, 0, 0, 0, 0},
		{0, 0, 0.01, 0, 0, 0, 0},
		{0, 0, 0, 0.03, 0, 0, 0},
		{0, 0, 0, 0, 0.02, 0, 0},
		{0, 0, 0, 0, 0, 0.05, 0},
		{0, 0, 0, 0, 0, 0, 0.66},
		{0.001, 0.001, 0, 0, 0, 0, 0},
	}
	got := pickShown(prob, 6)
	// Dropped: candidate 2 (peak 0.01) and 7; the rest in order of the λ
	// at which they peak.
	if want := []int{0, 1, 3, 4, 5, 6}; !slices.Equal(got, want) {
		t.Errorf("pickShown = %v, want %v", got, want)
	}
	if got := pickShown(prob[:2], 6); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("fewer candidates than asked: %v", got)
	}
	for _, n := range []int{0, -1} {
		if got := pickShown(prob, n); len(got) != 0 {
			t.Errorf("pickShown(prob, %d) = %v, want none", n, got)
		}
	}
	// Equal peaks are kept in the candidates' order: the third is dropped.
	if got := pickShown([][]float64{{0, 0.2}, {0.2, 0.1}, {0.2, 0}}, 2); !slices.Equal(got, []int{1, 0}) {
		t.Errorf("ties: %v, want [1 0] (both kept, ordered by where they peak)", got)
	}
}

// TestSweepCandidates: the three most frequent draws of every λ, each
// once, by rank and then by λ.
func TestSweepCandidates(t *testing.T) {
	m := func(s string) []bool {
		b := make([]bool, len(s))
		for i := range s {
			b[i] = s[i] == '1'
		}
		return b
	}
	ranked := [][]Ranked{
		{{Mask: m("100")}, {Mask: m("110")}, {Mask: m("111")}, {Mask: m("001")}},
		{{Mask: m("010")}, {Mask: m("100")}},
	}
	var got []string
	for _, c := range sweepCandidates(ranked) {
		got = append(got, family.MaskString(c))
	}
	if want := []string{"100", "010", "110", "111"}; !slices.Equal(got, want) {
		t.Errorf("candidates %v, want %v", got, want)
	}
}
