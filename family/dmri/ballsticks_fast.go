package dmri

import (
	"math"

	"github.com/prismsbi/prism/family"
)

// Specialised likelihood of the multi-shell ball-and-sticks families (b3s,
// b3s-brain: one MultiShellBall, MultiShellSticks, shared Gamma
// diffusivity, Gaussian noise), the inner loop of the posterior correction
// and refinement (package correct). It computes what logLikGrad computes
// for these models — the tests compare the two — but evaluates the ball's
// exponent once per distinct b-value instead of once per measurement and
// keeps the sticks in fixed-size arrays, without the generic
// per-compartment dispatch: about a third of the generic path's cost.

// isBallSticks reports whether every compartment is a MultiShellBall or
// MultiShellStick, with exactly one ball, and every noise model Gaussian.
func (m *Model) isBallSticks() bool {
	balls := 0
	for _, c := range m.spec.Compartments {
		switch c {
		case MultiShellBall:
			balls++
		case MultiShellStick:
		default:
			return false
		}
	}
	for _, n := range m.spec.Noise {
		if n != Gaussian {
			return false
		}
	}
	return balls == 1
}

// ballShells is the number of distinct b-values whose ball exponent a
// call caches; further b-values are computed per measurement.
const ballShells = 16

// shellIndex returns the position of b among the first n b-values of bb
// (the shells whose ball exponent a call has cached), or −1.
func shellIndex(bb *[ballShells]float64, n int, b float64) int {
	for q := range n {
		if bb[q] == b {
			return q
		}
	}
	return -1
}

// logLikGradBallSticks is logLikGrad for isBallSticks models.
func (m *Model) logLikGradBallSticks(d family.Design, x, theta []float64, mask []bool, st *state, grad []float64) float64 {
	for i := range grad[:m.layout.DMax] {
		grad[i] = 0
	}
	ball := -1
	var sticks [maxCompartments]int
	ns := 0
	for k, c := range m.spec.Compartments {
		if !st.on[k] {
			continue
		}
		if c == MultiShellBall {
			ball = k
		} else {
			sticks[ns] = k
			ns++
		}
	}
	var (
		gf       [maxCompartments]float64
		gn       [maxCompartments][3]float64
		gmd, gms float64
		gsg      float64
		// Ball exponent per distinct b: b, S = e^{−E}, ∂E/∂d, ∂E/∂d_std.
		bb, bs, bd, bsd [ballShells]float64
		nb              int
	)
	md, ms := st.md, st.ms
	sg := st.sigma
	fb := 0.0
	if ball >= 0 {
		fb = st.frac[ball]
	}
	var fs [maxCompartments]float64
	var nvec [maxCompartments][3]float64
	for i := range ns {
		fs[i] = st.frac[sticks[i]]
		nvec[i] = st.c[sticks[i]].n
	}
	ll := 0.0
	inv := 1 / sg
	// Per-call constants of the sticks' Gamma exponent (fastOK: the
	// closed forms below are usable; otherwise gammaExponent).
	fastOK := md > 0 && ms > 0
	var k1, alpha, invMD, invMS float64
	if fastOK {
		k1, alpha, invMD, invMS = ms*ms/md, md*md/(ms*ms), 1/md, 1/ms
	}
	for j := range x {
		r := d.Cov[4*j : 4*j+4]
		b := r[0]
		s := 0.0
		var skb, eb, esb float64
		if ball >= 0 {
			hit := shellIndex(&bb, nb, b)
			if hit >= 0 {
				skb, eb, esb = bs[hit], bd[hit], bsd[hit]
			} else {
				var e float64
				e, eb, esb, _ = gammaExponent(b, 1, md, ms)
				skb = math.Exp(-e)
				if nb < ballShells {
					bb[nb], bs[nb], bd[nb], bsd[nb] = b, skb, eb, esb
					nb++
				}
			}
			s += fb * skb
		}
		var sk, esd, ess, en [maxCompartments]float64
		for i := range ns {
			n := &nvec[i]
			gdot := r[1]*n[0] + r[2]*n[1] + r[3]*n[2]
			bc := b * gdot * gdot
			t := bc * k1
			var e float64
			if t < 1e-3 || !fastOK {
				var a, c, dc float64
				e, a, c, dc = gammaExponent(b, gdot*gdot, md, ms)
				esd[i], ess[i], en[i] = a, c, dc*2*gdot
			} else {
				// E = bc d L(t) = (d²/s²) log(1+t) with t = bc s²/d, and
				// with u = 1/(1+t): ∂E/∂d = 2E/d − bc u,
				// ∂E/∂s = (2/s)(bc d u − E), ∂E/∂c = b d u (below t = 1e−3
				// gammaExponent's series keeps full precision).
				u := 1 / (1 + t)
				e = alpha * math.Log1p(t)
				bdu := bc * md * u
				esd[i] = 2*e*invMD - bc*u
				ess[i] = 2 * invMS * (bdu - e)
				en[i] = b * md * u * 2 * gdot
			}
			sk[i] = math.Exp(-e)
			s += fs[i] * sk[i]
		}
		rr := (x[j] - s) * inv
		ll -= 0.5 * rr * rr
		dS := rr * inv
		gsg += rr * rr
		if ball >= 0 {
			gf[ball] += dS * skb
			w := -dS * fb * skb
			gmd += w * eb
			gms += w * esb
		}
		for i := range ns {
			gf[sticks[i]] += dS * sk[i]
			w := -dS * fs[i] * sk[i]
			gmd += w * esd[i]
			gms += w * ess[i]
			wn := w * en[i]
			g := &gn[i]
			g[0] += wn * r[1]
			g[1] += wn * r[2]
			g[2] += wn * r[3]
		}
	}
	nx := float64(len(x))
	ll -= nx * (math.Log(sg) + 0.5*math.Log(2*math.Pi))
	gsg = (gsg - nx) / sg
	nf := m.layout.FractionLatents()
	if nf > 0 {
		m.sb.VJP(theta[:nf], st.on[:m.nc], gf[:m.nc], grad[:nf])
	}
	so := m.layout.SharedOffset()
	grad[so] = gmd * st.dmd
	grad[so+1] = gms * st.dms
	for i := range ns {
		k := sticks[i]
		o := m.layout.Blocks[k].Offset
		cs := &st.c[k]
		grad[o] = dot(gn[i], cs.dn1)
		grad[o+1] = dot(gn[i], cs.dn2)
	}
	grad[m.layout.Blocks[m.nc+st.noise].Offset] = gsg * st.dsg
	return ll
}

// logLikBallSticks is logLik for isBallSticks models: the ball's exponent
// once per distinct b-value and the Gaussian normalisation once per call.
func (m *Model) logLikBallSticks(d family.Design, x []float64, st *state) float64 {
	ball := -1
	var fs [maxCompartments]float64
	var nvec [maxCompartments][3]float64
	ns := 0
	for k, c := range m.spec.Compartments {
		if !st.on[k] {
			continue
		}
		if c == MultiShellBall {
			ball = k
		} else {
			fs[ns], nvec[ns] = st.frac[k], st.c[k].n
			ns++
		}
	}
	md, ms := st.md, st.ms
	fastOK := md > 0 && ms > 0
	var k1, alpha float64
	if fastOK {
		k1, alpha = ms*ms/md, md*md/(ms*ms)
	}
	var bb, bs [ballShells]float64
	nb := 0
	fb := 0.0
	if ball >= 0 {
		fb = st.frac[ball]
	}
	ss := 0.0
	for j := range x {
		r := d.Cov[4*j : 4*j+4]
		b := r[0]
		s := 0.0
		if ball >= 0 {
			hit := shellIndex(&bb, nb, b)
			if hit >= 0 {
				s = bs[hit]
			} else {
				s = fb * math.Exp(-gammaE(b, md, ms))
				if nb < ballShells {
					bb[nb], bs[nb] = b, s
					nb++
				}
			}
		}
		for i := range ns {
			n := &nvec[i]
			gdot := r[1]*n[0] + r[2]*n[1] + r[3]*n[2]
			bc := b * gdot * gdot
			t := bc * k1
			var e float64
			if t < 1e-3 || !fastOK {
				e = gammaE(bc, md, ms)
			} else {
				e = alpha * math.Log1p(t)
			}
			s += fs[i] * math.Exp(-e)
		}
		rr := x[j] - s
		ss += rr * rr
	}
	sg := st.sigma
	return -0.5*ss/(sg*sg) - float64(len(x))*(math.Log(sg)+0.5*math.Log(2*math.Pi))
}
