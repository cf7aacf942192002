package dmri

// Symmetries of the latent posterior, for the Laplace start of the SMC
// correction (package correct, LaplaceOptions), which integrates over one
// fundamental domain of them and multiplies the evidence by their number.

// Symmetries describes the latent layout's directions and the
// transformations of θ that leave likelihood and prior unchanged.
type Symmetries struct {
	// Axes maps every compartment with a fibre direction in the
	// hemisphere bijection (family.Hemisphere: sticks, zeppelins, the
	// dispersed compartments' mean direction) to the full-latent indices
	// (z1, z2) of that direction.
	Axes map[int][2]int
	// Groups are the sets of ≥ 2 exchangeable compartments: the same
	// compartment type with the same Dirichlet concentration (bszt: its
	// sticks, its zeppelins, its tensors). A family with SortSticks has
	// none among its sticks (its prior orders them).
	Groups [][]int
	// Signs are the full-latent indices of the diagonal of every tensor's
	// Cholesky factor L: flipping the sign of a column of L (its diagonal
	// entry and those below it) leaves D = 10⁻³·L·Lᵀ + 10⁻⁴·I and the
	// N(0, I) prior unchanged, so each tensor's posterior has 8 copies.
	Signs []int
}

// Symmetries returns the family's symmetries.
func (m *Model) Symmetries() Symmetries {
	s := Symmetries{Axes: map[int][2]int{}}
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
