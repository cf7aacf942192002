package dmri

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/prismsbi/prism/family"
)

// Canonical stick order (Spec.SortSticks; issue 20). The sticks of
// ball-and-sticks with equal Dirichlet concentrations are exchangeable: the
// likelihood and the prior do not change when two sticks swap their
// directions and fractions, so the posterior of θ has one copy of every
// mode per relabelling (2 for a crossing of two sticks, 6 for three), and
// so has the posterior of the mask (ball+stick1 and ball+stick3 are the
// same model). BedpostX breaks the symmetry by ordering the sticks by
// fraction; a sorted family does the same in its training data: every
// prior draw is mapped to its representative with the active sticks first,
// by decreasing fraction, and the inactive ones after them, so that the
// network learns one mode instead of several.

// Canonicalize implements family.Canonicalizer: for a family with
// Spec.SortSticks it moves the active sticks of (θ, mask) to the first
// stick slots by decreasing fraction (the inactive ones after them, in
// their order), carrying each stick's direction latents with it, and
// recomputes the fraction latents of the new order. Other families are
// left unchanged.
func (m *Model) Canonicalize(theta []float64, mask []bool) {
	if !m.spec.SortSticks {
		return
	}
	var frac [maxCompartments]float64
	var on [maxCompartments]bool
	nf := m.layout.FractionLatents()
	copy(on[:m.nc], mask[:m.nc])
	m.sb.Fractions(theta[:nf], on[:m.nc], frac[:m.nc])
	slots := m.stickSlots()
	var order [maxCompartments]int
	ord := order[:len(slots)]
	for i := range ord {
		ord[i] = i
	}
	sort.SliceStable(ord, func(a, b int) bool {
		ka, kb := slots[ord[a]], slots[ord[b]]
		if mask[ka] != mask[kb] {
			return mask[ka]
		}
		return mask[ka] && frac[ka] > frac[kb]
	})
	w := m.spec.Compartments[slots[0]].latents()
	var blocks [maxCompartments * 3]float64
	var newOn [maxCompartments]bool
	var newFrac [maxCompartments]float64
	copy(newOn[:m.nc], on[:m.nc])
	copy(newFrac[:m.nc], frac[:m.nc])
	for i, src := range ord {
		k := slots[src]
		copy(blocks[i*w:(i+1)*w], theta[m.layout.Blocks[k].Offset:][:w])
		newOn[slots[i]] = on[k]
		newFrac[slots[i]] = frac[k]
	}
	for i, k := range slots {
		copy(theta[m.layout.Blocks[k].Offset:][:w], blocks[i*w:(i+1)*w])
		mask[k] = newOn[k]
	}
	if nf > 0 {
		m.sb.Inverse(newFrac[:m.nc], newOn[:m.nc], theta[:nf])
	}
}

// stickSlots returns the component indices of the exchangeable sticks of
// a sorted family (its MultiShellStick or Stick compartments).
func (m *Model) stickSlots() []int {
	var s []int
	for k, c := range m.spec.Compartments {
		if c == MultiShellStick || c == Stick {
			s = append(s, k)
		}
	}
	return s
}

// checkSortable reports why spec cannot sort its sticks: they must all be
// of one kind without own diffusivities (MultiShellStick: then a stick is
// its direction and its fraction) and have equal Dirichlet concentrations,
// so that relabelling them leaves the prior unchanged.
func checkSortable(spec Spec) error {
	var slots []int
	for k, c := range spec.Compartments {
		switch c {
		case MultiShellStick:
			slots = append(slots, k)
		case Stick:
			return fmt.Errorf("dmri: %s: SortSticks needs MultiShellStick compartments (a Stick has its own diffusivity)", spec.Name)
		}
	}
	if len(slots) < 2 {
		return fmt.Errorf("dmri: %s: SortSticks needs at least two sticks, got %d", spec.Name, len(slots))
	}
	for _, k := range slots[1:] {
		if spec.Alpha[k] != spec.Alpha[slots[0]] {
			return fmt.Errorf("dmri: %s: SortSticks needs equal Dirichlet concentrations of the sticks (exchangeable sticks), got %v", spec.Name, spec.Alpha)
		}
	}
	return nil
}

// SortedPrior is the mask prior of a sorted family: the distribution of
// the canonical mask (active sticks first) when the mask is drawn from
// Inner and the sticks are then relabelled. Sample draws from Inner and
// packs the sticks; LogProb is −Inf for a mask whose sticks are not packed
// and otherwise the log of Inner's total probability over the masks with
// the same other components and the same number of sticks.
type SortedPrior struct {
	Inner  family.MaskPrior
	Sticks []int // component indices of the exchangeable sticks, in slot order
}

// Sample implements family.MaskPrior.
func (p SortedPrior) Sample(r *rand.Rand, lambda float64, mask []bool) {
	p.Inner.Sample(r, lambda, mask)
	n := 0
	for _, k := range p.Sticks {
		if mask[k] {
			n++
		}
	}
	for i, k := range p.Sticks {
		mask[k] = i < n
	}
}

// LogProb implements family.MaskPrior.
func (p SortedPrior) LogProb(mask []bool, lambda float64) float64 {
	n := 0
	for i, k := range p.Sticks {
		if mask[k] {
			if i != n {
				return math.Inf(-1) // not packed
			}
			n++
		}
	}
	alt := append([]bool(nil), mask...)
	S := len(p.Sticks)
	lp := math.Inf(-1)
	for bits := 0; bits < 1<<S; bits++ {
		c := 0
		for i, k := range p.Sticks {
			alt[k] = bits&(1<<i) != 0
			if alt[k] {
				c++
			}
		}
		if c != n {
			continue
		}
		l := p.Inner.LogProb(alt, lambda)
		if math.IsInf(l, -1) {
			continue
		}
		hi := math.Max(lp, l)
		lp = hi + math.Log(math.Exp(lp-hi)+math.Exp(l-hi))
	}
	return lp
}
