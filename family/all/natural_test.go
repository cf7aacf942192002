package all

import (
	"math"
	"testing"

	"github.com/prismsbi/prism/family"
)

// TestNaturalIndexMatchesNatural: for every registered family, the flat
// natural vector (NaturalIndex.Fill, the family's NaturalWriter where it
// has one) holds exactly the values of Family.Natural's maps at the
// positions NaturalIndex reports, on prior draws of (mask, θ) and on the
// all-components-on mask. The two paths compute the same expressions, so
// equality is exact (NaN where a component is off).
func TestNaturalIndexMatchesNatural(t *testing.T) {
	for _, name := range family.Names() {
		f, err := family.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		x := family.NewNaturalIndex(f)
		samples := make([]family.Sample, 64)
		family.SimulateBatch(f, family.SimOptions{Seed: 7, Lambda: math.NaN()}, 0, samples)
		// One more with every base component on (and the first noise
		// component): dispersed and rare compartments are covered too.
		all := family.Sample{Theta: samples[0].Theta, Mask: make([]bool, len(f.Components()))}
		noise := false
		for k, c := range f.Components() {
			all.Mask[k] = c.Kind == family.Base || !noise
			noise = noise || c.Kind == family.Noise
		}
		samples = append(samples, all)
		fast, slow := make([]float64, x.Len()), make([]float64, x.Len())
		for _, s := range samples {
			x.Fill(s.Theta, s.Mask, fast)
			p := f.Natural(s.Theta, s.Mask)
			x.FillFromParams(p, slow)
			for i := range fast {
				if fast[i] != slow[i] && !(math.IsNaN(fast[i]) && math.IsNaN(slow[i])) {
					t.Fatalf("%s mask %s: entry %d is %v, Natural gives %v", name, family.MaskString(s.Mask), i, fast[i], slow[i])
				}
			}
			for k, vals := range p.Components {
				for pn, v := range vals {
					if j := x.Param(k, pn); j < 0 || fast[j] != v {
						t.Fatalf("%s: component %d parameter %s at %d, want %v", name, k, pn, j, v)
					}
				}
			}
			for pn, v := range p.Shared {
				if j := x.Shared(pn); j < 0 || fast[j] != v {
					t.Fatalf("%s: shared %s at %d, want %v", name, pn, j, v)
				}
			}
		}
	}
}
