package dmri

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/family"
)

// Natural parameters of the dispersed compartments (docs/families/dmri.md).

// kernelNames are the natural names of the kernel latents, in latent order.
func (c Compartment) kernelNames() []string {
	switch c {
	case WatsonStick, BinghamStick:
		return []string{"d"}
	case WatsonZeppelin, BinghamZeppelin:
		return []string{"d_par", "d_perp"}
	case NODDIWatson, NODDIBingham:
		return []string{"f", "d_par", "d_perp"}
	case SANDIWatson, SANDIBingham:
		return []string{"f_in", "f_ec", "d_par_in", "d_perp_ex", "d_par_ex"}
	}
	return nil
}

func dispersedParams(c Compartment, theta, phi family.Param) []family.Param {
	var ps []family.Param
	for i, n := range c.kernelNames() {
		p := family.Param{Name: n, Unit: "mm²/s", Prior: "U(0, 0.01)"}
		switch {
		case c == WatsonZeppelin && i == 0:
			p.Prior = "U(0, 0.003)"
		case c == WatsonZeppelin && i == 1:
			p.Prior = "U(0, d_par)"
		case n == "f" || n == "f_in" || n == "f_ec":
			p.Unit, p.Prior = "1", "U(0, 1)"
		}
		ps = append(ps, p)
	}
	ps = append(ps, theta, phi, family.Param{Name: "odi", Unit: "1", Prior: "U(0, 1); κ = 1/tan(odi·π/2)"})
	if c.bingham() {
		ps = append(ps,
			family.Param{Name: "beta_frac", Unit: "1", Prior: "U(0, 1); β = beta_frac·κ"},
			family.Param{Name: "psi", Unit: "rad", Prior: "U(0, π); angle of the second Bingham axis about μ from e_θ towards e_φ"})
	}
	return ps
}

// dispersedNatural fills v with the natural parameters of a decoded
// dispersed compartment with latent block z.
func dispersedNatural(c Compartment, cs *compState, z []float64, v map[string]float64) {
	ds := &cs.disp
	names := c.kernelNames()
	for i, n := range names {
		v[n] = ds.kp[i]
	}
	if c == WatsonZeppelin {
		v["d_perp"] = ds.kp[0] * ds.kp[1]
	}
	z = z[len(names):]
	v["theta"], v["phi"], _, _ = family.Hemisphere(z[0], z[1])
	v["odi"] = family.Phi(z[2])
	if c.bingham() {
		v["beta_frac"] = ds.bfrac
		v["psi"], _ = family.Interval(z[4], 0, math.Pi)
	}
}

// dispersedLatent inverts dispersedNatural.
func dispersedLatent(c Compartment, v map[string]float64, z []float64) error {
	names := c.kernelNames()
	var err error
	for i, n := range names {
		hi := diffMax
		if n == "f" || n == "f_in" || n == "f_ec" {
			hi = 1
		}
		val := v[n]
		if c == WatsonZeppelin {
			if i == 0 {
				hi = watsonZeppelinParMax
			} else {
				// d⊥ = d∥·u, u ~ U(0, 1).
				par, perp := v["d_par"], v["d_perp"]
				if math.IsNaN(perp) || perp < 0 || perp > par*(1+1e-12) {
					return fmt.Errorf("d_perp = %v is outside its prior support [0, d_par = %v]", perp, par)
				}
				val, hi = 0.5, 1
				if par > 0 {
					val = math.Min(1, perp/par)
				}
			}
		}
		if z[i], err = intervalLatent(val, 0, hi, n); err != nil {
			return err
		}
	}
	z = z[len(names):]
	theta, phi := v["theta"], v["phi"]
	if z[0], z[1], err = directionLatent(theta, phi); err != nil {
		return err
	}
	if z[2], err = intervalLatent(v["odi"], 0, 1, "odi"); err != nil {
		return err
	}
	if !c.bingham() {
		return nil
	}
	if z[3], err = intervalLatent(v["beta_frac"], 0, 1, "beta_frac"); err != nil {
		return err
	}
	psi := v["psi"]
	if math.IsNaN(psi) || math.IsInf(psi, 0) {
		return fmt.Errorf("psi = %v is not finite", psi)
	}
	// The second axis in world coordinates, then its angle in the frame of
	// the (possibly flipped) upper-hemisphere direction.
	mub := binghamAxis(theta, phi, psi)
	th2, ph2, _, _ := family.Hemisphere(z[0], z[1])
	et, ep := frameVectors(th2, ph2)
	p := math.Atan2(dot(mub, ep), dot(mub, et))
	if p < 0 {
		p += math.Pi
	}
	if p >= math.Pi {
		p -= math.Pi
	}
	z[4], err = intervalLatent(p, 0, math.Pi, "psi")
	return err
}

// frameVectors returns e_θ and e_φ at (θ, φ).
func frameVectors(theta, phi float64) (et, ep [3]float64) {
	st, ct := math.Sincos(theta)
	sp, cp := math.Sincos(phi)
	return [3]float64{ct * cp, ct * sp, -st}, [3]float64{-sp, cp, 0}
}

// binghamAxis returns the second Bingham axis μ_β = cos ψ e_θ + sin ψ e_φ of
// the ODF with main axis at polar angle θ and azimuth φ.
func binghamAxis(theta, phi, psi float64) [3]float64 {
	et, ep := frameVectors(theta, phi)
	s, c := math.Sincos(psi)
	return [3]float64{c*et[0] + s*ep[0], c*et[1] + s*ep[1], c*et[2] + s*ep[2]}
}
