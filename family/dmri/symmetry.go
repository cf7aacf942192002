package dmri

import "github.com/prismsbi/prism/family"

// Symmetries and ComponentKey make the dMRI families family.Symmetric:
// the latent symmetries the SMC correction of a model-selection fit
// integrates over (package correct, LaplaceOptions).

// Symmetries returns the family's symmetries.
func (m *Model) Symmetries() family.Symmetries {
	s := family.Symmetries{Axes: map[int][2]int{}}
	type kind struct {
		c     Compartment
		alpha float64
	}
	var order []kind
	groups := map[kind][]int{}
	for k, c := range m.spec.Compartments {
		off := m.layout.Blocks[k].Offset
		switch c {
		case Stick:
			s.Axes[k] = [2]int{off + 1, off + 2}
		case Zeppelin:
			s.Axes[k] = [2]int{off + 2, off + 3}
		case MultiShellStick:
			s.Axes[k] = [2]int{off, off + 1}
		case Tensor:
			s.Signs = append(s.Signs, off, off+2, off+5)
		case Ball, MultiShellBall, Dot:
		default: // dispersed: kernel latents, then polar and azimuth
			n := c.kernelLatents()
			s.Axes[k] = [2]int{off + n, off + n + 1}
		}
		if m.spec.SortSticks && c == MultiShellStick {
			continue
		}
		key := kind{c, m.spec.Alpha[k]}
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], k)
	}
	for _, key := range order {
		if g := groups[key]; len(g) > 1 {
			s.Groups = append(s.Groups, g)
		}
	}
	return s
}

// ComponentKey maps compartment k's latent block to a point that
// identifies its value up to the compartment's own symmetries, for
// matching exchangeable compartments without a direction: a tensor's six
// distinct entries of D in 10⁻³ mm²/s (whatever the signs of L's
// columns), otherwise the latents themselves.
func (m *Model) ComponentKey(k int, block []float64) []float64 {
	if m.spec.Compartments[k] != Tensor {
		return append([]float64(nil), block...)
	}
	D := choleskyTensor(block)
	return []float64{D[0][0] / tensorScale, D[0][1] / tensorScale, D[0][2] / tensorScale,
		D[1][1] / tensorScale, D[1][2] / tensorScale, D[2][2] / tensorScale}
}
