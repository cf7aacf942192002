package dmri

import (
	"math"

	"github.com/prismsbi/prism/family"
)

// Dispersed (convolved) compartments: a single-fibre kernel averaged over a
// Watson or Bingham orientation distribution (paper §4.2.2, App. C.2).
//
// Every kernel used here has the form K(n) = e^{−b d⊥} exp(−a (g·n)²) with
// a = b(d∥ − d⊥) (stick: d⊥ = 0), and every ODF the form
// f(n) = exp(nᵀAn)/Z(A) with A = κμμᵀ + βμ_βμ_βᵀ (Watson: β = 0). The
// spherical convolution is therefore itself a Bingham integral,
//
//	∫_{S²} K(n) f(n) dn = e^{−b d⊥} Z(A − a g gᵀ) / Z(A),
//
// evaluated exactly by the 1-D quadrature of bingham.go (no spherical-
// harmonic truncation; see docs/families/dmri.md for why this replaces the
// reference's order-14 SH fit). The gradient follows from
// ∂log Z(B)/∂B = E_B[nnᵀ] =: M(B):
//
//	∂log S/∂a = −gᵀM(B)g,   ∂log S/∂A = M(B) − M(A),
//
// and A's dependence on κ, β, μ, μ_β.

// dispKernels is the largest number of kernels of one dispersed compartment
// (NODDI and SANDI: an intra-neurite stick and an extra-neurite zeppelin).
const dispKernels = 2

// dispState is the decoded state of a dispersed compartment.
type dispState struct {
	kappa, beta float64
	dkappa      float64 // dκ/dz_odi
	bfrac       float64 // β/κ
	dbfrac      float64 // dβ_frac/dz
	// Frame (μ, μ_β, ν) of the ODF and derivatives of μ_β.
	mu, mub, nu           [3]float64
	dmub1, dmub2, dmubpsi [3]float64
	logZA                 float64    // log Z(A) − κ
	mA                    [3]float64 // E_f[(μ·n)²], E_f[(μ_β·n)²], E_f[(ν·n)²]
	// Signal = c0 + Σ_i w_i e^{−b perp_i} Z(A − b(par_i−perp_i)ggᵀ)/Z(A).
	c0          float64
	nk          int
	w, par, prp [dispKernels]float64
	// Natural kernel parameters and their derivatives w.r.t. their latents.
	kp, dkp [5]float64
}

// kernelGrad holds one kernel's value and its log-derivatives at one
// measurement.
type kernelGrad struct {
	s             float64 // kernel signal S_i
	dpar, dprp    float64 // ∂log S_i/∂d∥, ∂d⊥
	dkappa, dbeta float64 // ∂log S_i/∂κ, ∂β
	vmu, vmub     [3]float64
}

// dispGrad is the per-measurement scratch of a dispersed compartment.
type dispGrad struct {
	k [dispKernels]kernelGrad
}

// dispAcc accumulates ∂log p/∂(natural parameters) of a dispersed compartment.
type dispAcc struct {
	c0, kappa, beta float64
	w, par, prp     [dispKernels]float64
	vmu, vmub       [3]float64 // ∂/∂μ and ∂/∂μ_β
}

// kernelLatents is the number of kernel (non-orientation) latents.
func (c Compartment) kernelLatents() int {
	switch c {
	case WatsonStick, BinghamStick:
		return 1
	case WatsonZeppelin, BinghamZeppelin:
		return 2
	case NODDIWatson, NODDIBingham:
		return 3
	case SANDIWatson, SANDIBingham:
		return 5
	}
	return 0
}

func (c Compartment) bingham() bool {
	return c == BinghamStick || c == BinghamZeppelin || c == NODDIBingham || c == SANDIBingham
}

func (c Compartment) dispersed() bool { return c.kernelLatents() > 0 }

// Prior bounds of the dispersed compartments that differ from diffMax.
const (
	// watsonZeppelinParMax is the Watson zeppelin's d∥ bound, the paper
	// table's 3·10⁻⁹ m²/s = 0.003 mm²/s; its d⊥ ~ U(0, d∥).
	watsonZeppelinParMax = 0.003
)

// odiKappa maps ODI ∈ [0, 1] to κ = 1/tan(ODI·π/2), capped at KappaMax,
// and returns dκ/dODI (0 where capped).
func odiKappa(odi float64) (kappa, dk float64) {
	s, c := math.Sincos(odi * math.Pi / 2)
	if s*KappaMax <= c {
		return KappaMax, 0
	}
	return c / s, -math.Pi / 2 / (s * s)
}

// setFrame sets μ = n(θ, φ), μ_β = cos ψ e_θ + sin ψ e_φ, ν = μ × μ_β and the
// derivatives of μ_β w.r.t. the latents (z1, z2, zψ) of θ, φ, ψ.
// e_θ = (cosθcosφ, cosθsinφ, −sinθ), e_φ = (−sinφ, cosφ, 0).
func (ds *dispState) setFrame(z1, z2 float64, psi, dpsi float64, cs *compState) {
	ct := family.Phi(-z1)
	st := math.Sqrt(family.Phi(z1) * (1 + ct))
	phi := 2*math.Pi*family.Phi(z2) - math.Pi
	dphi := 2 * math.Pi * family.NormPDF(z2)
	sp, cp := math.Sincos(phi)
	var dth float64
	if st > 0 {
		dth = family.NormPDF(z1) / st
	}
	mu := cs.n
	et := [3]float64{ct * cp, ct * sp, -st}
	ep := [3]float64{-sp, cp, 0}
	sps, cps := math.Sincos(psi)
	ds.mu = mu
	for i := 0; i < 3; i++ {
		ds.mub[i] = cps*et[i] + sps*ep[i]
		ds.dmub1[i] = -cps * mu[i] * dth
		ds.dmub2[i] = (cps*ct*ep[i] - sps*(st*mu[i]+ct*et[i])) * dphi
		ds.dmubpsi[i] = (-sps*et[i] + cps*ep[i]) * dpsi
	}
	ds.nu = cross(mu, ds.mub)
}

func cross(a, b [3]float64) [3]float64 {
	return [3]float64{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
}

// setODF computes the normaliser and second moments of the ODF.
func (ds *dispState) setODF(bing bool) {
	if !bing {
		s, m := hyp1F1Half(ds.kappa)
		ds.logZA = math.Log(4 * math.Pi * s)
		ds.mA = [3]float64{m, 0.5 * (1 - m), 0.5 * (1 - m)}
		return
	}
	ds.logZA, ds.mA = binghamLogZ([3]float64{0, ds.beta - ds.kappa, -ds.kappa}, true)
}

// decodeDispersed decodes the block z of a dispersed compartment: kernel
// latents, then polar, azimuth, ODI and, for Bingham ODFs, β_frac and ψ.
func decodeDispersed(c Compartment, z []float64, cs *compState) {
	ds := &cs.disp
	nk := c.kernelLatents()
	for i := 0; i < nk; i++ {
		hi := diffMax
		switch c {
		case WatsonZeppelin:
			hi = watsonZeppelinParMax
			if i == 1 {
				hi = 1 // d⊥/d∥
			}
		case NODDIWatson, NODDIBingham:
			if i == 0 {
				hi = 1 // f
			}
		case SANDIWatson, SANDIBingham:
			if i < 2 {
				hi = 1 // f_in, f_ec
			}
		}
		ds.kp[i], ds.dkp[i] = family.Interval(z[i], 0, hi)
	}
	kp := ds.kp
	ds.c0 = 0
	switch c {
	case WatsonStick, BinghamStick:
		ds.nk, ds.w[0], ds.par[0], ds.prp[0] = 1, 1, kp[0], 0
	case WatsonZeppelin:
		ds.nk, ds.w[0], ds.par[0], ds.prp[0] = 1, 1, kp[0], kp[0]*kp[1]
	case BinghamZeppelin:
		ds.nk, ds.w[0], ds.par[0], ds.prp[0] = 1, 1, kp[0], kp[1]
	case NODDIWatson, NODDIBingham:
		ds.nk = 2
		ds.w = [2]float64{kp[0], 1 - kp[0]}
		ds.par = [2]float64{kp[1], kp[1]}
		ds.prp = [2]float64{0, kp[2]}
	case SANDIWatson, SANDIBingham:
		ds.nk = 2
		fin, fec := kp[0], kp[1]
		ds.c0 = (1 - fec) * (1 - fin)
		ds.w = [2]float64{(1 - fec) * fin, fec}
		ds.par = [2]float64{kp[2], kp[4]}
		ds.prp = [2]float64{0, kp[3]}
	}
	z = z[nk:]
	orientation(z[0], z[1], cs)
	odi := family.Phi(z[2])
	var dk float64
	ds.kappa, dk = odiKappa(odi)
	ds.dkappa = dk * family.NormPDF(z[2])
	psi, dpsi := 0.0, 0.0
	ds.beta, ds.bfrac, ds.dbfrac = 0, 0, 0
	if c.bingham() {
		ds.bfrac, ds.dbfrac = family.Interval(z[3], 0, 1)
		ds.beta = ds.bfrac * ds.kappa
		psi, dpsi = family.Interval(z[4], 0, math.Pi)
	}
	ds.setFrame(z[0], z[1], psi, dpsi, cs)
	ds.setODF(c.bingham())
}

// kernelLog returns log of the dispersed kernel e^{−b d⊥}Z(A − a ggᵀ)/Z(A)
// with a = b(dPar − dPerp) and, when kg is non-nil, its derivatives.
func (ds *dispState) kernelLog(b float64, g [3]float64, dPar, dPerp float64, kg *kernelGrad) float64 {
	gp := [3]float64{dot(ds.mu, g), dot(ds.mub, g), dot(ds.nu, g)}
	a := b * (dPar - dPerp)
	// B' = A' − κI − a g'g'ᵀ in the ODF frame, A' = diag(κ, β, 0).
	var B [3][3]float64
	diag := [3]float64{0, ds.beta - ds.kappa, -ds.kappa}
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			B[i][j] = -a * gp[i] * gp[j]
		}
		B[i][i] += diag[i]
	}
	var w [3]float64
	var V [3][3]float64
	switch {
	case a == 0:
		w = diag
		V = [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}
	case kg == nil && ds.beta == 0:
		w = watsonEigen(a, ds.kappa, gp[0])
	default:
		w, V = jacobi3(B)
	}
	logZB, m := binghamLogZ(w, kg != nil)
	ls := -b*dPerp + logZB - ds.logZA
	if kg == nil {
		return ls
	}
	// M_B' = V diag(m) Vᵀ; ΔM' = M_B' − diag(mA).
	var dM [3][3]float64
	for i := 0; i < 3; i++ {
		for j := i; j < 3; j++ {
			s := V[i][0]*m[0]*V[j][0] + V[i][1]*m[1]*V[j][1] + V[i][2]*m[2]*V[j][2]
			dM[i][j], dM[j][i] = s, s
		}
	}
	q := 0.0
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			q += gp[i] * dM[i][j] * gp[j]
		}
	}
	for i := 0; i < 3; i++ {
		dM[i][i] -= ds.mA[i]
	}
	kg.dpar = -b * q
	kg.dprp = -b + b*q
	kg.dkappa = dM[0][0]
	kg.dbeta = dM[1][1]
	for i := 0; i < 3; i++ {
		kg.vmu[i] = dM[0][0]*ds.mu[i] + dM[1][0]*ds.mub[i] + dM[2][0]*ds.nu[i]
		kg.vmub[i] = dM[0][1]*ds.mu[i] + dM[1][1]*ds.mub[i] + dM[2][1]*ds.nu[i]
	}
	return ls
}

// watsonEigen returns the eigenvalues of diag(0, −κ, −κ) − a g′g′ᵀ with
// g′₀ = g0 (|g′| = 1): −κ, and the two roots of the 2×2 block on
// span(e₀, g′⊥), [[−a g0², −a g0 g⊥], [−a g0 g⊥, −κ − a g⊥²]], whose trace
// is −(a+κ) and determinant aκg0². The smaller-magnitude root is taken as
// det/(other root) so that it keeps full relative precision.
func watsonEigen(a, kappa, g0 float64) [3]float64 {
	g02 := g0 * g0
	m := -0.5 * (a + kappa)
	h := 0.5 * (kappa + a*(1-2*g02)) // half the difference of the diagonal
	d := math.Sqrt(h*h + a*a*g02*(1-g02))
	det := a * kappa * g02
	var l1, l2 float64
	if m >= 0 {
		l1 = m + d
		if l1 != 0 {
			l2 = det / l1
		}
	} else {
		l2 = m - d
		l1 = det / l2
	}
	return [3]float64{l1, l2, -kappa}
}

// signal returns the compartment signal at (b, g); with dg non-nil it also
// fills the kernels' values and log-derivatives.
func (ds *dispState) signal(b float64, g [3]float64, dg *dispGrad) float64 {
	s := ds.c0
	for i := 0; i < ds.nk; i++ {
		var kg *kernelGrad
		if dg != nil {
			kg = &dg.k[i]
		}
		v := math.Exp(ds.kernelLog(b, g, ds.par[i], ds.prp[i], kg))
		if kg != nil {
			kg.s = v
		}
		s += ds.w[i] * v
	}
	return s
}

// accumulate adds G·∂S/∂(natural parameters) to acc, where G = ∂log p/∂S_k ·f_k.
func (ds *dispState) accumulate(G float64, dg *dispGrad, acc *dispAcc) {
	acc.c0 += G
	for i := 0; i < ds.nk; i++ {
		kg := &dg.k[i]
		acc.w[i] += G * kg.s
		gi := G * ds.w[i] * kg.s
		acc.par[i] += gi * kg.dpar
		acc.prp[i] += gi * kg.dprp
		acc.kappa += gi * kg.dkappa
		acc.beta += gi * kg.dbeta
		addScaled(&acc.vmu, gi*2*ds.kappa, kg.vmu)
		addScaled(&acc.vmub, gi*2*ds.beta, kg.vmub)
	}
}

// latentGrad writes the chain rule of acc into the block gradient gz.
func (ds *dispState) latentGrad(c Compartment, cs *compState, acc *dispAcc, gz []float64) {
	kp, dkp := ds.kp, ds.dkp
	switch c {
	case WatsonStick, BinghamStick:
		gz[0] = acc.par[0] * dkp[0]
	case WatsonZeppelin:
		// d∥ = kp0, d⊥ = kp0·kp1.
		gz[0] = (acc.par[0] + acc.prp[0]*kp[1]) * dkp[0]
		gz[1] = acc.prp[0] * kp[0] * dkp[1]
	case BinghamZeppelin:
		gz[0] = acc.par[0] * dkp[0]
		gz[1] = acc.prp[0] * dkp[1]
	case NODDIWatson, NODDIBingham:
		gz[0] = (acc.w[0] - acc.w[1]) * dkp[0]
		gz[1] = (acc.par[0] + acc.par[1]) * dkp[1]
		gz[2] = acc.prp[1] * dkp[2]
	case SANDIWatson, SANDIBingham:
		fin, fec := kp[0], kp[1]
		gz[0] = (-(1-fec)*acc.c0 + (1-fec)*acc.w[0]) * dkp[0]
		gz[1] = (-(1-fin)*acc.c0 - fin*acc.w[0] + acc.w[1]) * dkp[1]
		gz[2] = acc.par[0] * dkp[2]
		gz[3] = acc.prp[1] * dkp[3]
		gz[4] = acc.par[1] * dkp[4]
	}
	o := gz[c.kernelLatents():]
	o[0] = dot(acc.vmu, cs.dn1) + dot(acc.vmub, ds.dmub1)
	o[1] = dot(acc.vmu, cs.dn2) + dot(acc.vmub, ds.dmub2)
	o[2] = (acc.kappa + acc.beta*ds.bfrac) * ds.dkappa
	if c.bingham() {
		o[3] = acc.beta * ds.kappa * ds.dbfrac
		o[4] = dot(acc.vmub, ds.dmubpsi)
	}
}

// dispersedSignal evaluates one dispersed kernel e^{−b d⊥}·(Z(A − a ggᵀ)/Z(A))
// for an ODF with axes μ, μ_β (orthogonal unit vectors) and concentrations
// κ ≥ β ≥ 0.
func dispersedSignal(b float64, g, mu, muB [3]float64, dPar, dPerp, kappa, beta float64) float64 {
	ds := dispState{kappa: kappa, beta: beta, mu: mu, mub: muB, nu: cross(mu, muB)}
	ds.setODF(beta != 0)
	return math.Exp(ds.kernelLog(b, g, dPar, dPerp, nil))
}

// anyPerpendicular returns a unit vector orthogonal to the unit vector mu.
func anyPerpendicular(mu [3]float64) [3]float64 {
	var e [3]float64
	if math.Abs(mu[0]) < 0.6 {
		e = [3]float64{1, 0, 0}
	} else {
		e = [3]float64{0, 1, 0}
	}
	p := dot(e, mu)
	v := [3]float64{e[0] - p*mu[0], e[1] - p*mu[1], e[2] - p*mu[2]}
	l := math.Sqrt(dot(v, v))
	return [3]float64{v[0] / l, v[1] / l, v[2] / l}
}

// WatsonStickSignal is the Stick exp(−b d (g·n)²) averaged over the Watson
// ODF with axis mu (unit) and concentration κ ≥ 0.
func WatsonStickSignal(b float64, g, mu [3]float64, d, kappa float64) float64 {
	return dispersedSignal(b, g, mu, anyPerpendicular(mu), d, 0, kappa, 0)
}

// WatsonZeppelinSignal is the Zeppelin averaged over the Watson ODF.
func WatsonZeppelinSignal(b float64, g, mu [3]float64, dPar, dPerp, kappa float64) float64 {
	return dispersedSignal(b, g, mu, anyPerpendicular(mu), dPar, dPerp, kappa, 0)
}

// BinghamStickSignal is the Stick averaged over the Bingham ODF
// ∝ exp(κ(μ·n)² + β(μ_β·n)²), μ ⊥ μ_β unit vectors, κ ≥ β ≥ 0.
func BinghamStickSignal(b float64, g, mu, muB [3]float64, d, kappa, beta float64) float64 {
	return dispersedSignal(b, g, mu, muB, d, 0, kappa, beta)
}

// BinghamZeppelinSignal is the Zeppelin averaged over the Bingham ODF.
func BinghamZeppelinSignal(b float64, g, mu, muB [3]float64, dPar, dPerp, kappa, beta float64) float64 {
	return dispersedSignal(b, g, mu, muB, dPar, dPerp, kappa, beta)
}
