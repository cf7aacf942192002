package dmri

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSymmetries checks the symmetries against the likelihood itself:
// on random data, relabelling two compartments of a group (blocks and
// fractions swapped through the natural parameters), or flipping a
// column of a tensor's Cholesky factor, leaves the log-likelihood
// unchanged (to 1e−9 relative: the two evaluations differ only by the
// order of floating-point sums), and every axis's latents are the
// direction the compartment reports as theta, phi (to 1e−12: Φ and
// its inverse round-trip in double precision).
func TestSymmetries(t *testing.T) {
	for _, f := range []*Model{BSZT(), BSZTBrain(), BSZTConv(), B3SBrain()} {
		s := f.Symmetries()
		r := rand.New(rand.NewPCG(3, 4))
		des := refDesign()
		mask := make([]bool, len(f.comps))
		for k := range mask {
			mask[k] = k < f.nc
		}
		mask[f.nc] = true
		theta := make([]float64, f.layout.DMax)
		for i := range theta {
			theta[i] = r.NormFloat64()
		}
		x := make([]float64, des.N)
		f.Simulate(r, des, theta, mask, x)
		ll := f.LogLikelihood(des, x, theta, mask, nil)
		nat := f.Natural(theta, mask)
		for k, ax := range s.Axes {
			th, ph := nat.Components[k]["theta"], nat.Components[k]["phi"]
			z1, z2 := theta[ax[0]], theta[ax[1]]
			w1, w2, err := directionLatent(th, ph)
			if err != nil || math.Abs(w1-z1) > 1e-9 || math.Abs(w2-z2) > 1e-9 {
				t.Errorf("%s: %s's axis latents (%v, %v), its direction gives (%v, %v) %v", f.Name(), f.comps[k].Name, z1, z2, w1, w2, err)
			}
		}
		for _, g := range s.Groups {
			for _, k := range g[1:] {
				if f.spec.Compartments[k] != f.spec.Compartments[g[0]] || f.spec.Alpha[k] != f.spec.Alpha[g[0]] {
					t.Errorf("%s: group %v mixes compartments", f.Name(), g)
				}
			}
			p := nat
			p.Components = map[int]map[string]float64{}
			for k, v := range nat.Components {
				p.Components[k] = v
			}
			p.Fractions = append([]float64(nil), nat.Fractions...)
			a, b := g[0], g[1]
			p.Components[a], p.Components[b] = nat.Components[b], nat.Components[a]
			pos := map[int]int{}
			for i, k := range f.layout.Simplex {
				pos[k] = i
			}
			p.Fractions[pos[a]], p.Fractions[pos[b]] = nat.Fractions[pos[b]], nat.Fractions[pos[a]]
			sw, err := f.Latent(p, mask)
			if err != nil {
				t.Fatalf("%s: relabelled latents: %v", f.Name(), err)
			}
			if l2 := f.LogLikelihood(des, x, sw, mask, nil); math.Abs(l2-ll) > 1e-9*math.Abs(ll) {
				t.Errorf("%s: swapping %s and %s: log-likelihood %v, was %v", f.Name(), f.comps[a].Name, f.comps[b].Name, l2, ll)
			}
		}
		// Column flips of every tensor: columns 0, 1, 2 of L hold latents
		// {0, 1, 3}, {2, 4}, {5} of the block.
		for k, c := range f.spec.Compartments {
			if c != Tensor {
				continue
			}
			off := f.layout.Blocks[k].Offset
			key := f.ComponentKey(k, theta[off:off+6])
			for _, col := range [][]int{{0, 1, 3}, {2, 4}, {5}} {
				fl := append([]float64(nil), theta...)
				for _, i := range col {
					fl[off+i] = -fl[off+i]
				}
				if l2 := f.LogLikelihood(des, x, fl, mask, nil); math.Abs(l2-ll) > 1e-9*math.Abs(ll) {
					t.Errorf("%s: flipping column %v of %s: log-likelihood %v, was %v", f.Name(), col, f.comps[k].Name, l2, ll)
				}
				k2 := f.ComponentKey(k, fl[off:off+6])
				for i := range key {
					if math.Abs(k2[i]-key[i]) > 1e-12*(1+math.Abs(key[i])) {
						t.Errorf("%s: the key of %s changes under a column flip", f.Name(), f.comps[k].Name)
					}
				}
			}
			if !containsAll(s.Signs, off, off+2, off+5) {
				t.Errorf("%s: signs %v miss %s's diagonal", f.Name(), s.Signs, f.comps[k].Name)
			}
		}
	}
	if g := BSZT().Symmetries().Groups; len(g) != 3 {
		t.Errorf("bszt: groups %v, want sticks, zeppelins, tensors", g)
	}
	if g := B3S().Symmetries().Groups; len(g) != 0 {
		t.Errorf("b3s (unequal concentrations): groups %v, want none", g)
	}
}

func containsAll(s []int, v ...int) bool {
	have := map[int]bool{}
	for _, x := range s {
		have[x] = true
	}
	for _, x := range v {
		if !have[x] {
			return false
		}
	}
	return true
}
