package dmri

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/prismsbi/prism/family"
)

// Compartment is the type of one signal compartment of a multi-compartment
// model.
type Compartment int

const (
	// Ball: isotropic exp(−b d), d ~ U(0, 0.01) mm²/s; 1 latent.
	Ball Compartment = iota
	// Stick: exp(−b d (g·n)²), d ~ U(0, 0.01), n uniform on the upper
	// hemisphere; 3 latents (d, polar, azimuth).
	Stick
	// Zeppelin: exp(−b[d∥(g·n)² + d⊥(1−(g·n)²)]), d∥, d⊥ ~ U(0, 0.01)
	// independently, n as for Stick; 4 latents.
	Zeppelin
	// Tensor: exp(−b gᵀDg), D = 10⁻³LLᵀ + 10⁻⁴I with the six lower-triangular
	// entries of L standard normal; 6 latents.
	Tensor
	// MultiShellBall: Ball with a Gamma-distributed diffusivity whose mean d
	// and standard deviation d_std are shared by all multi-shell
	// compartments; no own latents.
	MultiShellBall
	// MultiShellStick: Stick with the shared Gamma-distributed diffusivity;
	// 2 latents (polar, azimuth).
	MultiShellStick
	// Dot: S ≡ 1 (fully restricted water); no latents.
	Dot
	// WatsonStick: Stick (d ~ U(0, 0.01)) averaged over a Watson ODF with
	// axis μ uniform on the upper hemisphere and κ = 1/tan(ODI·π/2),
	// ODI ~ U(0, 1); 4 latents (d, polar, azimuth, ODI).
	WatsonStick
	// WatsonZeppelin: Zeppelin with d∥ ~ U(0, 0.003), d⊥ ~ U(0, d∥) (paper
	// table) averaged over a Watson ODF; 5 latents.
	WatsonZeppelin
	// BinghamStick: Stick averaged over a Bingham ODF (κ as Watson,
	// β = β_frac·κ, β_frac ~ U(0, 1), second axis at angle ψ ~ U(0, π)
	// about μ); 6 latents (d, polar, azimuth, ODI, β_frac, ψ).
	BinghamStick
	// BinghamZeppelin: Zeppelin (d∥, d⊥ ~ U(0, 0.01) independently)
	// averaged over a Bingham ODF; 7 latents.
	BinghamZeppelin
	// NODDIWatson: f·WatsonStick(λ∥) + (1−f)·WatsonZeppelin(λ∥, λ⊥) with a
	// common ODF, f ~ U(0, 1), λ∥, λ⊥ ~ U(0, 0.01); 6 latents
	// (f, λ∥, λ⊥, polar, azimuth, ODI).
	NODDIWatson
	// NODDIBingham: NODDI with a Bingham ODF; 8 latents.
	NODDIBingham
	// SANDIWatson: (1−f_ec)[f_in·WatsonStick(λ∥in) + (1−f_in)·1] +
	// f_ec·WatsonZeppelin(λ∥ex, λ⊥ex), f_in, f_ec ~ U(0, 1), diffusivities
	// U(0, 0.01); 8 latents (f_in, f_ec, λ∥in, λ⊥ex, λ∥ex, polar, azimuth,
	// ODI).
	SANDIWatson
	// SANDIBingham: SANDI with a Bingham ODF; 10 latents.
	SANDIBingham
)

var compartmentNames = [...]string{"Ball", "Stick", "Zeppelin", "Tensor", "MultiShellBall", "MultiShellStick",
	"Dot", "WatsonStick", "WatsonZeppelin", "BinghamStick", "BinghamZeppelin", "NODDIWatson", "NODDIBingham",
	"SANDIWatson", "SANDIBingham"}

func (c Compartment) String() string {
	if c >= 0 && int(c) < len(compartmentNames) {
		return compartmentNames[c]
	}
	return fmt.Sprintf("Compartment(%d)", int(c))
}

// latents is the size of the compartment's block in θ.
func (c Compartment) latents() int {
	switch c {
	case Ball:
		return 1
	case Stick:
		return 3
	case Zeppelin:
		return 4
	case Tensor:
		return 6
	case MultiShellBall:
		return 0
	case MultiShellStick:
		return 2
	case Dot:
		return 0
	}
	if k := c.kernelLatents(); k > 0 {
		n := k + 3 // + polar, azimuth, ODI
		if c.bingham() {
			n += 2 // β_frac, ψ
		}
		return n
	}
	panic("dmri: unknown compartment " + c.String())
}

// Noise is a noise model; exactly one noise component is active in a mask.
type Noise int

const (
	// Gaussian: y = S + σε, SNR = 1/σ ~ U(3, 80).
	Gaussian Noise = iota
	// Rician: y = |S + σε_r + iσε_i| with independent ε_r, ε_i,
	// SNR = 1/σ ~ U(3, 80).
	Rician
)

func (n Noise) String() string {
	switch n {
	case Gaussian:
		return "GaussianNoise"
	case Rician:
		return "RicianNoise"
	}
	return fmt.Sprintf("Noise(%d)", int(n))
}

// Prior bounds shared by all compartments (paper Table "dMRI signal
// models" and the reference implementation).
const (
	diffMax    = 0.01  // diffusivities ~ U(0, 0.01) mm²/s
	diffStdMax = 0.005 // multi-shell d_std ~ U(0, 0.005) mm²/s
	snrMin     = 3.0   // SNR ~ U(3, 80)
	snrMax     = 80.0
	// maxCompartments bounds the number of signal compartments so that the
	// per-call scratch space fits on the stack.
	maxCompartments = 24
	// ricianFloor is the smallest observation the Rician likelihood uses;
	// smaller (zero or negative) values are raised to it, as the reference
	// implementation does.
	ricianFloor = 1e-12
)

// Spec describes a multi-compartment dMRI model family.
type Spec struct {
	Name        string
	Description string
	// Compartments are the base components, in mask order; their fractions
	// live on the simplex in this order.
	Compartments []Compartment
	// Noise lists the noise components, which follow the compartments in
	// the mask.
	Noise []Noise
	// Alpha is the Dirichlet concentration of each compartment's fraction.
	Alpha []float64
	// MaskPrior is p(M | λ) over len(Compartments)+len(Noise) components.
	MaskPrior family.MaskPrior
	// Diffusivity is the uniform prior range [lo, hi] in mm²/s of the own
	// diffusivities of Ball, Stick and Zeppelin compartments (d, d_par
	// and d_perp, independently). The zero value means the paper's
	// U(0, 0.01). Tensors (Cholesky prior), the multi-shell compartments
	// (SharedD) and the dispersed compartments (their own bounds) do not
	// use it.
	Diffusivity Range
	// SharedD and SharedDStd are the uniform prior ranges [lo, hi] in
	// mm²/s of the mean and standard deviation of the Gamma-distributed
	// diffusivity shared by multi-shell compartments. The zero value means
	// the paper's U(0, 0.01) and U(0, 0.005).
	SharedD, SharedDStd Range
	// SortSticks makes the family's prior draws canonical (Canonicalize):
	// active sticks first, by decreasing fraction. It needs two or more
	// MultiShellStick compartments with equal Dirichlet concentrations;
	// the mask prior is wrapped in a SortedPrior.
	SortSticks bool
}

// Range is a closed interval [Lo, Hi] of a uniform prior.
type Range struct{ Lo, Hi float64 }

func (r Range) String() string { return fmt.Sprintf("U(%g, %g)", r.Lo, r.Hi) }

// orDefault returns r, or [0, hi] if r is the zero Range.
func (r Range) orDefault(hi float64) Range {
	if r == (Range{}) {
		return Range{0, hi}
	}
	return r
}

func (r Range) valid() bool {
	return r.Lo >= 0 && r.Hi > r.Lo && !math.IsInf(r.Hi, 0)
}

// Model is a multi-compartment dMRI family built from a Spec. It implements
// family.Family and family.TableDesigner; it holds no mutable state.
type Model struct {
	spec   Spec
	comps  []family.Component
	layout *family.Layout
	sb     family.StickBreaking
	shared bool // has multi-shell compartments with shared (d, d_std)
	nc     int  // number of signal compartments
	// ballSticks selects the specialised likelihood gradient
	// (ballsticks_fast.go).
	ballSticks bool
}

// New builds a model family from spec.
func New(spec Spec) (*Model, error) {
	nc := len(spec.Compartments)
	switch {
	case spec.Name == "":
		return nil, errors.New("dmri: spec has no name")
	case nc == 0 || nc > maxCompartments:
		return nil, fmt.Errorf("dmri: %s: need 1 to %d compartments, got %d", spec.Name, maxCompartments, nc)
	case len(spec.Noise) == 0:
		return nil, fmt.Errorf("dmri: %s: need at least one noise model", spec.Name)
	case len(spec.Alpha) != nc:
		return nil, fmt.Errorf("dmri: %s: %d Dirichlet concentrations for %d compartments", spec.Name, len(spec.Alpha), nc)
	case spec.MaskPrior == nil:
		return nil, fmt.Errorf("dmri: %s: no mask prior", spec.Name)
	}
	for _, a := range spec.Alpha {
		if !(a > 0) || math.IsInf(a, 0) {
			return nil, fmt.Errorf("dmri: %s: Dirichlet concentrations must be positive and finite, got %v", spec.Name, spec.Alpha)
		}
	}
	spec.SharedD, spec.SharedDStd = spec.SharedD.orDefault(diffMax), spec.SharedDStd.orDefault(diffStdMax)
	if !spec.SharedD.valid() || !spec.SharedDStd.valid() {
		return nil, fmt.Errorf("dmri: %s: shared diffusivity ranges must satisfy 0 ≤ lo < hi < ∞, got d %v and d_std %v", spec.Name, spec.SharedD, spec.SharedDStd)
	}
	spec.Diffusivity = spec.Diffusivity.orDefault(diffMax)
	if !spec.Diffusivity.valid() {
		return nil, fmt.Errorf("dmri: %s: the diffusivity range must satisfy 0 ≤ lo < hi < ∞, got %v", spec.Name, spec.Diffusivity)
	}
	m := &Model{spec: spec, nc: nc}
	count := map[Compartment]int{}
	for _, c := range spec.Compartments {
		count[c]++
	}
	seen := map[Compartment]int{}
	simplex := make([]int, nc)
	for k, c := range spec.Compartments {
		if c < Ball || c > SANDIBingham {
			return nil, fmt.Errorf("dmri: %s: unknown compartment %d", spec.Name, int(c))
		}
		simplex[k] = k
		seen[c]++
		name := c.String()
		if count[c] > 1 {
			name = fmt.Sprintf("%s%d", name, seen[c])
		}
		m.comps = append(m.comps, family.Component{Name: name, Kind: family.Base, Params: compartmentParams(c, spec.Diffusivity), Latent: c.latents(), Tags: c.Tags()})
		if c == MultiShellBall || c == MultiShellStick {
			m.shared = true
		}
	}
	for _, n := range spec.Noise {
		if n != Gaussian && n != Rician {
			return nil, fmt.Errorf("dmri: %s: unknown noise model %d", spec.Name, int(n))
		}
		m.comps = append(m.comps, family.Component{Name: n.String(), Kind: family.Noise,
			Params: []family.Param{{Name: "snr", Unit: "1", Prior: "U(3, 80); σ = 1/snr relative to S0 = 1"}}, Latent: 1})
	}
	var shared []family.Param
	if m.shared {
		shared = []family.Param{
			{Name: "d", Unit: "mm²/s", Prior: spec.SharedD.String() + "; mean of the Gamma-distributed diffusivity"},
			{Name: "d_std", Unit: "mm²/s", Prior: spec.SharedDStd.String() + "; standard deviation of the Gamma-distributed diffusivity"},
		}
	}
	if spec.SortSticks {
		if err := checkSortable(spec); err != nil {
			return nil, err
		}
		var sticks []int
		for k, c := range spec.Compartments {
			if c == MultiShellStick {
				sticks = append(sticks, k)
			}
		}
		m.spec.MaskPrior = SortedPrior{Inner: spec.MaskPrior, Sticks: sticks}
	}
	m.layout = family.NewLayout(m.comps, simplex, append([]float64(nil), spec.Alpha...), shared)
	m.sb = family.StickBreaking{Alpha: m.layout.Alpha}
	m.ballSticks = m.isBallSticks()
	return m, nil
}

func compartmentParams(c Compartment, dr Range) []family.Param {
	d := family.Param{Name: "d", Unit: "mm²/s", Prior: dr.String()}
	theta := family.Param{Name: "theta", Unit: "rad", Prior: "polar angle in [0, π/2], direction uniform on the upper hemisphere"}
	phi := family.Param{Name: "phi", Unit: "rad", Prior: "azimuth U(−π, π)"}
	switch c {
	case Ball:
		return []family.Param{d}
	case Stick:
		return []family.Param{d, theta, phi}
	case Zeppelin:
		return []family.Param{
			{Name: "d_par", Unit: "mm²/s", Prior: dr.String()},
			{Name: "d_perp", Unit: "mm²/s", Prior: dr.String() + ", independent of d_par"},
			theta, phi}
	case Tensor:
		ps := make([]family.Param, 6)
		for i, n := range tensorNames {
			ps[i] = family.Param{Name: n, Unit: "mm²/s", Prior: "D = 1e-3·LLᵀ + 1e-4·I, tril(L) ~ N(0, I₆)"}
		}
		return ps
	case MultiShellBall:
		return nil
	case MultiShellStick:
		return []family.Param{theta, phi}
	case Dot:
		return nil
	}
	return dispersedParams(c, theta, phi)
}

var tensorNames = [6]string{"Dxx", "Dxy", "Dxz", "Dyy", "Dyz", "Dzz"}

// Name implements family.Family.
func (m *Model) Name() string { return m.spec.Name }

// Description implements family.Family.
func (m *Model) Description() string { return m.spec.Description }

// Components implements family.Family. The returned slice must not be
// modified.
func (m *Model) Components() []family.Component { return m.comps }

// Layout implements family.Family.
func (m *Model) Layout() *family.Layout { return m.layout }

// MaskPrior implements family.Family.
func (m *Model) MaskPrior() family.MaskPrior { return m.spec.MaskPrior }

// compState holds the decoded natural parameters of one compartment and the
// derivatives of the natural parameters with respect to their latents.
type compState struct {
	d1, d2   float64    // d (Ball, Stick) or d∥, d⊥ (Zeppelin)
	dd1, dd2 float64    // ∂d1/∂z, ∂d2/∂z
	n        [3]float64 // fibre direction
	dn1, dn2 [3]float64 // ∂n/∂z_polar, ∂n/∂z_azimuth
	D        [3][3]float64
	disp     dispState // dispersed compartments
}

// state is θ decoded for one mask. It lives on the stack of the caller.
type state struct {
	on         [maxCompartments]bool
	frac       [maxCompartments]float64
	c          [maxCompartments]compState
	md, ms     float64 // shared multi-shell mean and std diffusivity
	dmd, dms   float64 // their derivatives w.r.t. the shared latents
	noise      int     // index of the active noise model in spec.Noise, −1 if none
	sigma, dsg float64 // σ = 1/SNR and dσ/dz
}

// decode maps θ to natural parameters for the active components.
func (m *Model) decode(theta []float64, mask []bool, st *state) {
	if len(theta) < m.layout.DMax || len(mask) < len(m.comps) {
		panic(fmt.Sprintf("dmri: %s: θ has length %d (want %d), mask %d (want %d)",
			m.spec.Name, len(theta), m.layout.DMax, len(mask), len(m.comps)))
	}
	nf := m.layout.FractionLatents()
	copy(st.on[:m.nc], mask[:m.nc])
	m.sb.Fractions(theta[:nf], st.on[:m.nc], st.frac[:m.nc])
	if m.shared {
		so := m.layout.SharedOffset()
		d, ds := m.spec.SharedD, m.spec.SharedDStd
		st.md, st.dmd = family.Interval(theta[so], d.Lo, d.Hi)
		st.ms, st.dms = family.Interval(theta[so+1], ds.Lo, ds.Hi)
	}
	for k, c := range m.spec.Compartments {
		if !mask[k] {
			continue
		}
		z := theta[m.layout.Blocks[k].Offset:]
		cs := &st.c[k]
		dr := m.spec.Diffusivity
		switch c {
		case Ball:
			cs.d1, cs.dd1 = family.Interval(z[0], dr.Lo, dr.Hi)
		case Stick:
			cs.d1, cs.dd1 = family.Interval(z[0], dr.Lo, dr.Hi)
			orientation(z[1], z[2], cs)
		case Zeppelin:
			cs.d1, cs.dd1 = family.Interval(z[0], dr.Lo, dr.Hi)
			cs.d2, cs.dd2 = family.Interval(z[1], dr.Lo, dr.Hi)
			orientation(z[2], z[3], cs)
		case Tensor:
			cs.D = choleskyTensor(z[:6])
		case MultiShellStick:
			orientation(z[0], z[1], cs)
		case Dot, MultiShellBall:
		default:
			decodeDispersed(c, z, cs)
		}
	}
	st.noise = -1
	for i := range m.spec.Noise {
		k := m.nc + i
		if mask[k] {
			st.noise = i
			snr, dsnr := family.Interval(theta[m.layout.Blocks[k].Offset], snrMin, snrMax)
			st.sigma = 1 / snr
			st.dsg = -dsnr / (snr * snr)
			break
		}
	}
}

// orientation sets the direction n of the hemisphere bijection
// (family.Hemisphere) and its derivatives. It works with cos θ = Φ(−z1) and
// sin θ = √(Φ(z1)(1+cos θ)) directly, which keeps full precision near the
// pole where going through θ = arccos(·) would not.
func orientation(z1, z2 float64, cs *compState) {
	ct := family.Phi(-z1)
	st := math.Sqrt(family.Phi(z1) * (1 + ct))
	p1 := family.NormPDF(z1)
	phi := 2*math.Pi*family.Phi(z2) - math.Pi
	dphi := 2 * math.Pi * family.NormPDF(z2)
	sp, cp := math.Sincos(phi)
	cs.n = [3]float64{st * cp, st * sp, ct}
	// ∂cosθ/∂z1 = −φ(z1); ∂sinθ/∂z1 = cosθ·φ(z1)/sinθ.
	var dst float64
	if st > 0 {
		dst = ct * p1 / st
	}
	cs.dn1 = [3]float64{dst * cp, dst * sp, -p1}
	cs.dn2 = [3]float64{-st * sp * dphi, st * cp * dphi, 0}
}

func (m *Model) checkDesign(d family.Design, n int) {
	if d.CovDim != 4 || len(d.Cov) < d.N*4 || n < d.N {
		panic(fmt.Sprintf("dmri: %s: design %q must have 4 covariates (b, gx, gy, gz) per measurement and N=%d rows; got CovDim=%d, %d values, output length %d",
			m.spec.Name, d.Name, d.N, d.CovDim, len(d.Cov), n))
	}
}

// Forward implements family.Family: out[j] = Σ_k f_k S_k(b_j, g_j) over the
// active compartments. Inactive compartments are never evaluated.
func (m *Model) Forward(d family.Design, theta []float64, mask []bool, out []float64) {
	m.checkDesign(d, len(out))
	var st state
	m.decode(theta, mask, &st)
	m.forward(d, &st, out[:d.N])
}

func (m *Model) forward(d family.Design, st *state, out []float64) {
	for j := range out {
		out[j] = 0
	}
	cov := d.Cov[:4*len(out)]
	for k, c := range m.spec.Compartments {
		if !st.on[k] {
			continue
		}
		f := st.frac[k]
		cs := &st.c[k]
		switch c {
		case Ball:
			// The ball depends on b only; tables list shells together, so
			// reuse the value while b repeats.
			pb, v := math.NaN(), 0.0
			for j := range out {
				if b := cov[4*j]; b != pb {
					pb, v = b, f*math.Exp(-b*cs.d1)
				}
				out[j] += v
			}
		case Stick:
			n := cs.n
			for j := range out {
				r := cov[4*j : 4*j+4]
				gn := r[1]*n[0] + r[2]*n[1] + r[3]*n[2]
				out[j] += f * math.Exp(-r[0]*cs.d1*gn*gn)
			}
		case Zeppelin:
			n := cs.n
			for j := range out {
				r := cov[4*j : 4*j+4]
				gn := r[1]*n[0] + r[2]*n[1] + r[3]*n[2]
				gn *= gn
				out[j] += f * math.Exp(-r[0]*(cs.d1*gn+cs.d2*(1-gn)))
			}
		case Tensor:
			for j := range out {
				r := cov[4*j : 4*j+4]
				out[j] += f * math.Exp(-r[0]*quadForm([3]float64{r[1], r[2], r[3]}, cs.D))
			}
		case MultiShellBall:
			pb, v := math.NaN(), 0.0
			for j := range out {
				if b := cov[4*j]; b != pb {
					pb, v = b, f*math.Exp(-gammaE(b, st.md, st.ms))
				}
				out[j] += v
			}
		case MultiShellStick:
			n := cs.n
			for j := range out {
				r := cov[4*j : 4*j+4]
				gn := r[1]*n[0] + r[2]*n[1] + r[3]*n[2]
				out[j] += f * math.Exp(-gammaE(r[0]*gn*gn, st.md, st.ms))
			}
		case Dot:
			for j := range out {
				out[j] += f
			}
		default:
			ds := &cs.disp
			for j := range out {
				r := cov[4*j : 4*j+4]
				out[j] += f * ds.signal(r[0], [3]float64{r[1], r[2], r[3]}, nil)
			}
		}
	}
}

// gammaE is the exponent of GammaSignal for bc = b·c without derivatives:
// b c d log1p(t)/t with t = b c s²/d.
func gammaE(bc, d, s float64) float64 {
	if d <= 0 {
		return 0
	}
	t := bc * s * s / d
	if t < 1e-8 {
		// log1p(t)/t = 1 − t/2 + O(t²); the O(t²) term is below 1e−16.
		return bc * d * (1 - 0.5*t)
	}
	return bc * d * math.Log1p(t) / t
}

// Simulate implements family.Family: the noiseless signal plus the active
// noise model's noise.
func (m *Model) Simulate(r *rand.Rand, d family.Design, theta []float64, mask []bool, out []float64) {
	m.checkDesign(d, len(out))
	var st state
	m.decode(theta, mask, &st)
	if st.noise < 0 {
		panic("dmri: " + m.spec.Name + ": mask has no active noise component")
	}
	out = out[:d.N]
	m.forward(d, &st, out)
	sg := st.sigma
	switch m.spec.Noise[st.noise] {
	case Gaussian:
		for j := range out {
			out[j] += sg * r.NormFloat64()
		}
	case Rician:
		for j := range out {
			re := out[j] + sg*r.NormFloat64()
			im := sg * r.NormFloat64()
			out[j] = math.Hypot(re, im)
		}
	}
}

// LogLikelihood implements family.Family. For Gaussian noise
// log p = Σ_j log N(y_j; S_j, σ²); for Rician noise
// log p = Σ_j [log y_j − 2 log σ − (y_j² + S_j²)/(2σ²) + log I₀(y_j S_j/σ²)]
// with y_j raised to at least 1e−12. The gradient with respect to θ is
// analytic (zero on inactive dimensions).
func (m *Model) LogLikelihood(d family.Design, x, theta []float64, mask []bool, grad []float64) float64 {
	m.checkDesign(d, len(x))
	var st state
	m.decode(theta, mask, &st)
	if st.noise < 0 {
		panic("dmri: " + m.spec.Name + ": mask has no active noise component")
	}
	rician := m.spec.Noise[st.noise] == Rician
	if grad == nil {
		if m.ballSticks {
			return m.logLikBallSticks(d, x[:d.N], &st)
		}
		return m.logLik(d, x[:d.N], &st, rician)
	}
	if m.ballSticks {
		return m.logLikGradBallSticks(d, x[:d.N], theta, mask, &st, grad)
	}
	return m.logLikGrad(d, x[:d.N], theta, mask, &st, rician, grad)
}

// logLik is the likelihood without gradient; it reuses forward.
func (m *Model) logLik(d family.Design, x []float64, st *state, rician bool) float64 {
	var buf [512]float64
	sg := st.sigma
	ll := 0.0
	for lo := 0; lo < len(x); lo += len(buf) {
		hi := min(lo+len(buf), len(x))
		s := buf[:hi-lo]
		sub := family.Design{N: hi - lo, CovDim: 4, Cov: d.Cov[4*lo : 4*hi]}
		m.forward(sub, st, s)
		for j, sj := range s {
			ll += noiseLogLik(x[lo+j], sj, sg, rician)
		}
	}
	return ll
}

// noiseLogLik is the log density of one observation y given signal s.
func noiseLogLik(y, s, sg float64, rician bool) float64 {
	if !rician {
		r := (y - s) / sg
		return -0.5*r*r - math.Log(sg) - 0.5*math.Log(2*math.Pi)
	}
	y = math.Max(y, ricianFloor)
	s2 := sg * sg
	// −(y²+S²)/(2σ²) + log I₀(x) = −(y−S)²/(2σ²) + log(I₀(x)e^{−x}) for y,S ≥ 0.
	if s < 0 {
		s = 0
	}
	r := (y - s) / sg
	return math.Log(y) - 2*math.Log(sg) - 0.5*r*r + logI0e(y*s/s2)
}

// logLikGrad computes the likelihood and its latent gradient in one pass
// over the measurements.
func (m *Model) logLikGrad(d family.Design, x, theta []float64, mask []bool, st *state, rician bool, grad []float64) float64 {
	for i := range grad[:m.layout.DMax] {
		grad[i] = 0
	}
	// Accumulators of ∂ log p / ∂(natural parameters).
	var (
		gf       [maxCompartments]float64    // fractions
		gd1, gd2 [maxCompartments]float64    // diffusivities
		gn       [maxCompartments][3]float64 // directions
		gD       [maxCompartments][3][3]float64
		gmd, gms float64 // shared multi-shell d, d_std
		gsg      float64 // σ
		// Per-measurement scratch: signal and ∂E/∂(param) of S_k = e^{−E}.
		sk, e1, e2, en, esd, ess [maxCompartments]float64
		dg                       [maxCompartments]dispGrad // dispersed compartments
		ga                       [maxCompartments]dispAcc
	)
	sg := st.sigma
	s2 := sg * sg
	ll := 0.0
	for j := range x {
		r := d.Cov[4*j : 4*j+4]
		b := r[0]
		g := [3]float64{r[1], r[2], r[3]}
		s := 0.0
		for k, c := range m.spec.Compartments {
			if !st.on[k] {
				continue
			}
			cs := &st.c[k]
			var e float64
			switch c {
			case Ball:
				e = b * cs.d1
				e1[k] = b
			case Stick:
				gn := dot(g, cs.n)
				e = b * cs.d1 * gn * gn
				e1[k] = b * gn * gn
				en[k] = 2 * b * cs.d1 * gn // ∂E/∂n = en·g
			case Zeppelin:
				gn := dot(g, cs.n)
				c2 := gn * gn
				e = b * (cs.d1*c2 + cs.d2*(1-c2))
				e1[k] = b * c2
				e2[k] = b * (1 - c2)
				en[k] = 2 * b * (cs.d1 - cs.d2) * gn
			case Tensor:
				e = b * quadForm(g, cs.D)
			case MultiShellBall:
				e, esd[k], ess[k], _ = gammaExponent(b, 1, st.md, st.ms)
			case MultiShellStick:
				gn := dot(g, cs.n)
				var dc float64
				e, esd[k], ess[k], dc = gammaExponent(b, gn*gn, st.md, st.ms)
				en[k] = dc * 2 * gn
			case Dot:
			default:
				sk[k] = cs.disp.signal(b, g, &dg[k])
				s += st.frac[k] * sk[k]
				continue
			}
			sk[k] = math.Exp(-e)
			s += st.frac[k] * sk[k]
		}
		// Noise: log density, ∂/∂S and ∂/∂σ.
		y := x[j]
		var dS float64
		if rician {
			y = math.Max(y, ricianFloor)
			sp := math.Max(s, 0)
			z := y * sp / s2
			rr := (y - sp) / sg
			ll += math.Log(y) - 2*math.Log(sg) - 0.5*rr*rr + logI0e(z)
			a := BesselRatio(z)
			if s > 0 {
				dS = (-sp + a*y) / s2
			}
			gsg += -2/sg + (y*y+sp*sp)/(s2*sg) - 2*a*z/sg
		} else {
			rr := (y - s) / sg
			ll += -0.5*rr*rr - math.Log(sg) - 0.5*math.Log(2*math.Pi)
			dS = rr / sg
			gsg += (rr*rr - 1) / sg
		}
		// Back-propagate dS into the compartments: ∂S/∂p = −f_k S_k ∂E/∂p.
		for k, c := range m.spec.Compartments {
			if !st.on[k] {
				continue
			}
			gf[k] += dS * sk[k]
			w := -dS * st.frac[k] * sk[k]
			switch c {
			case Ball:
				gd1[k] += w * e1[k]
			case Stick:
				gd1[k] += w * e1[k]
				addScaled(&gn[k], w*en[k], g)
			case Zeppelin:
				gd1[k] += w * e1[k]
				gd2[k] += w * e2[k]
				addScaled(&gn[k], w*en[k], g)
			case Tensor:
				wb := w * b
				for p := 0; p < 3; p++ {
					for q := 0; q < 3; q++ {
						gD[k][p][q] += wb * g[p] * g[q]
					}
				}
			case MultiShellBall:
				gmd += w * esd[k]
				gms += w * ess[k]
			case MultiShellStick:
				gmd += w * esd[k]
				gms += w * ess[k]
				addScaled(&gn[k], w*en[k], g)
			case Dot:
			default:
				st.c[k].disp.accumulate(dS*st.frac[k], &dg[k], &ga[k])
			}
		}
	}
	// Chain rule to the latents.
	nf := m.layout.FractionLatents()
	if nf > 0 {
		m.sb.VJP(theta[:nf], st.on[:m.nc], gf[:m.nc], grad[:nf])
	}
	if m.shared {
		so := m.layout.SharedOffset()
		grad[so] = gmd * st.dmd
		grad[so+1] = gms * st.dms
	}
	for k, c := range m.spec.Compartments {
		if !mask[k] {
			continue
		}
		o := m.layout.Blocks[k].Offset
		cs := &st.c[k]
		switch c {
		case Ball:
			grad[o] = gd1[k] * cs.dd1
		case Stick:
			grad[o] = gd1[k] * cs.dd1
			grad[o+1] = dot(gn[k], cs.dn1)
			grad[o+2] = dot(gn[k], cs.dn2)
		case Zeppelin:
			grad[o] = gd1[k] * cs.dd1
			grad[o+1] = gd2[k] * cs.dd2
			grad[o+2] = dot(gn[k], cs.dn1)
			grad[o+3] = dot(gn[k], cs.dn2)
		case Tensor:
			choleskyTensorVJP(theta[o:o+6], gD[k], grad[o:o+6])
		case MultiShellStick:
			grad[o] = dot(gn[k], cs.dn1)
			grad[o+1] = dot(gn[k], cs.dn2)
		case Dot, MultiShellBall:
		default:
			cs.disp.latentGrad(c, cs, &ga[k], grad[o:o+c.latents()])
		}
	}
	grad[m.layout.Blocks[m.nc+st.noise].Offset] = gsg * st.dsg
	return ll
}

func addScaled(dst *[3]float64, a float64, v [3]float64) {
	dst[0] += a * v[0]
	dst[1] += a * v[1]
	dst[2] += a * v[2]
}

// ObservationKind implements family.ObservationKinder: one signal per
// measurement (b, gx, gy, gz).
func (m *Model) ObservationKind() string { return family.ObservationDiffusion }
