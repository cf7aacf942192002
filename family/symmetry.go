package family

// Symmetries of a family's latent posterior, for the Laplace start of the
// SMC correction (package correct, LaplaceOptions), which integrates over
// one fundamental domain of them and multiplies the evidence by their
// number. The dMRI families describe theirs (family/dmri).

// Symmetries describes the latent layout's directions and the
// transformations of θ that leave likelihood and prior unchanged.
type Symmetries struct {
	// Axes maps every compartment with a fibre direction in the
	// hemisphere bijection (Hemisphere: sticks, zeppelins, the
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

// Symmetric is a family that describes its latent symmetries, which the
// correction of a model-selection fit needs: Symmetries, and for
// exchangeable components without a direction (tensors) ComponentKey,
// a point that identifies component k's value (its latent block) up to
// the component's own symmetries.
type Symmetric interface {
	Symmetries() Symmetries
	ComponentKey(k int, block []float64) []float64
}
