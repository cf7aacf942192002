package family

// Component tags (Component.Tags) shared by families and the programs that
// interpret their components. A program selects components by tag, never
// by name, so any family — built in or from a spec file — whose components
// carry the same tags gets the same treatment.
//
// Diffusion MRI compartments (the dMRI families, docs/dmri.md). The voxel
// pipeline's BedpostX-style maps look for one TagBall and TagStick
// components with shared diffusivity; presence summaries group components
// by these tags.
const (
	// TagBall: isotropic free diffusion, exp(−b d) (Ball, MultiShellBall).
	TagBall = "ball"
	// TagStick: a compartment with zero perpendicular diffusivity along a
	// direction (θ, φ) (Stick, MultiShellStick, Watson/Bingham sticks).
	TagStick = "stick"
	// TagZeppelin: axially symmetric with d∥ ≥ d⊥ > 0 (Zeppelin,
	// Watson/Bingham zeppelins).
	TagZeppelin = "zeppelin"
	// TagTensor: a full diffusion tensor.
	TagTensor = "tensor"
	// TagDot: fully restricted water, S ≡ 1.
	TagDot = "dot"
	// TagNeurite: a two-compartment neurite model (NODDI, SANDI).
	TagNeurite = "neurite"
	// TagDispersed: averaged over a Watson or Bingham orientation
	// distribution (parameter odi, and beta_frac, psi for Bingham).
	TagDispersed = "dispersed"
	// TagOriented: has a principal direction given by parameters theta
	// and phi (polar and azimuthal angle, radians, upper hemisphere).
	TagOriented = "oriented"
	// TagSharedDiffusivity: the diffusivity is the shared Gamma-distributed
	// d, d_std of the multi-shell compartments, not the component's own.
	TagSharedDiffusivity = "shared-diffusivity"
)
