package network

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
)

// headDim16 is tinyConfig with the paper's head width Dh = 16, which takes
// the attention kernel's four-query routines, and a wider model so that the
// products have more than one block of columns.
func headDim16(f family.Family) Config {
	c := tinyConfig(f)
	c.ModelDim, c.Heads, c.HeadDim = 32, 2, 16
	return c
}

// firstDiff returns the index of the first element where a and b differ
// bit for bit, or −1.
func firstDiff(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestDenoiseMaskedGroupingInvariance checks that a row's denoised output
// does not depend on the other rows of the call: the same rows through
// DenoiseMasked in one call (at GOMAXPROCS 1, 2 and 3, which give other row
// chunks), one row per call, and in groups of other sizes that cut the
// observations' segments at other places must agree BIT FOR BIT. Every
// kernel computes each row (attention: each query) with the same
// arithmetic wherever it sits in its call, so there is no tolerance.
func TestDenoiseMaskedGroupingInvariance(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(family.Family) Config
	}{{"dh8", tinyConfig}, {"dh16", headDim16}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNet(t, "b3s", tc.cfg, 7)
			perturbParams(n, 0.3, 8)
			const nObs, r = 3, 150
			s := simulate(n.fam, 11, 0, nObs)
			dm := n.dmax
			rr := rand.New(rand.NewPCG(4, 4))
			// One mask for every number of active parameter tokens: a
			// segment of rows then holds a number of queries that is not
			// a multiple of 4 (the attention kernel's query groups).
			var masks [][]bool
			seen := map[int]bool{}
			for bits := 1; bits < 1<<n.c; bits++ {
				mask := make([]bool, n.c)
				for i := range mask {
					mask[i] = bits>>i&1 == 1
				}
				active := make([]bool, dm)
				n.layout.Active(mask, active)
				tokActive := make([]bool, len(n.tokens))
				n.tokenActivity(mask, active, tokActive)
				nt := 0
				for _, a := range tokActive {
					if a {
						nt++
					}
				}
				if !seen[nt] {
					seen[nt] = true
					masks = append(masks, mask)
				}
			}
			// Observation 1 keeps a third of its rows.
			var rowObs []int
			for k := range nObs * r {
				if k/r != 1 || k%3 == 0 {
					rowObs = append(rowObs, k/r)
				}
			}
			b := len(rowObs)
			th := make([]float32, b*dm)
			for i := range th {
				th[i] = float32(rr.NormFloat64())
			}
			g := engine.NewInferenceGraph()
			enc := encodeSamples(t, n, g, s)
			cross := n.ParamCrossKV(g, enc)
			procs := runtime.GOMAXPROCS(0)
			defer runtime.GOMAXPROCS(procs)
			for mi, mask := range masks {
				for _, sigma := range []float64{0.7, 3} {
					call := func(r0, r1 int) []float32 {
						t.Helper()
						out, err := n.DenoiseMasked(g, enc, cross, mask, rowObs[r0:r1], g.Input(th[r0*dm:r1*dm], r1-r0, dm), sigma)
						if err != nil {
							t.Fatal(err)
						}
						return out.Data
					}
					runtime.GOMAXPROCS(2)
					want := call(0, b)
					check := func(what string, r0 int, got []float32) {
						t.Helper()
						if i := firstDiff(want[r0*dm:r0*dm+len(got)], got); i >= 0 {
							t.Fatalf("mask %d σ %v: %s: row %d dim %d is %v, %v in one call of %d rows",
								mi, sigma, what, r0+i/dm, i%dm, got[i], want[r0*dm+i], b)
						}
					}
					for _, p := range []int{1, 3} {
						runtime.GOMAXPROCS(p)
						check(fmt.Sprintf("GOMAXPROCS %d", p), 0, call(0, b))
					}
					runtime.GOMAXPROCS(2)
					for _, size := range []int{1, 2, 3, 5, 7, 33, 130} {
						for r0 := 0; r0 < b; r0 += size {
							r1 := min(b, r0+size)
							check(fmt.Sprintf("groups of %d", size), r0, call(r0, r1))
							if size == 1 && r0 > 40 {
								break // one row per call: the first 40 rows suffice
							}
						}
					}
				}
			}
		})
	}
}

// TestEncodeGroupingInvariance checks that an observation's encoder tokens
// do not depend on the other observations encoded with it (bit for bit).
func TestEncodeGroupingInvariance(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(family.Family) Config
	}{{"dh8", tinyConfig}, {"dh16", headDim16}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNet(t, "b3s", tc.cfg, 7)
			perturbParams(n, 0.3, 8)
			s := simulate(n.fam, 11, 0, 7)
			g := engine.NewInferenceGraph()
			all := encodeSamples(t, n, g, s)
			per := len(all.Data) / len(s)
			for i := range s {
				one := encodeSamples(t, n, g, s[i:i+1])
				if j := firstDiff(all.Data[i*per:(i+1)*per], one.Data); j >= 0 {
					t.Fatalf("observation %d element %d: %v alone, %v with the others", i, j, one.Data[j], all.Data[i*per+j])
				}
			}
		})
	}
}
