package dmri

import "math"

// ElectrostaticShells returns shells sets of perShell unit vectors on the
// upper hemisphere (z ≥ 0) that are spread evenly as antipodally symmetric
// point sets, i.e. as perShell axes per shell.
//
// Construction (deterministic, no randomness): the shells·perShell points
// start on a Fibonacci spiral over the upper hemisphere and are assigned to
// the shells in turn. They then minimise the electrostatic energy of
// antipodal point pairs (Jones et al. 1999; multi-shell weighting as in
// Caruyer et al. 2013)
//
//	E = Σ_{i<j} w_ij (1/‖p_i − p_j‖ + 1/‖p_i + p_j‖),  w_ij = 1 + [shell(i) = shell(j)],
//
// so that every shell on its own and all shells together cover the sphere
// evenly. The minimisation is projected gradient descent on the sphere with
// a backtracking step size, run until the relative energy decrease falls
// below 1e−14 (at most 20,000 iterations). Finally every point is flipped to
// z ≥ 0, which leaves E unchanged.
func ElectrostaticShells(shells, perShell int) [][][3]float64 {
	n := shells * perShell
	p := make([][3]float64, n)
	golden := math.Pi * (3 - math.Sqrt(5))
	for i := range p {
		z := 1 - (float64(i)+0.5)/float64(n)
		r := math.Sqrt(1 - z*z)
		s, c := math.Sincos(golden * float64(i))
		p[i] = [3]float64{r * c, r * s, z}
	}
	shell := func(i int) int { return i % shells }
	energy := func(p [][3]float64, grad [][3]float64) float64 {
		for i := range grad {
			grad[i] = [3]float64{}
		}
		e := 0.0
		for i := range p {
			for j := i + 1; j < len(p); j++ {
				w := 1.0
				if shell(i) == shell(j) {
					w = 2
				}
				var dm, dp [3]float64
				for k := 0; k < 3; k++ {
					dm[k] = p[i][k] - p[j][k]
					dp[k] = p[i][k] + p[j][k]
				}
				rm := math.Sqrt(dot(dm, dm))
				rp := math.Sqrt(dot(dp, dp))
				e += w * (1/rm + 1/rp)
				if grad != nil {
					// ∂(1/‖a‖)/∂a = −a/‖a‖³.
					cm := -w / (rm * rm * rm)
					cp := -w / (rp * rp * rp)
					for k := 0; k < 3; k++ {
						grad[i][k] += cm*dm[k] + cp*dp[k]
						grad[j][k] += -cm*dm[k] + cp*dp[k]
					}
				}
			}
		}
		return e
	}
	grad := make([][3]float64, n)
	trial := make([][3]float64, n)
	e := energy(p, grad)
	step := 1e-3
	for it := 0; it < 20000 && step > 1e-15; it++ {
		for i := range p {
			// Tangential part of the gradient, then a step and renormalisation.
			gr := grad[i]
			pr := dot(gr, p[i])
			var q [3]float64
			for k := 0; k < 3; k++ {
				q[k] = p[i][k] - step*(gr[k]-pr*p[i][k])
			}
			nq := math.Sqrt(dot(q, q))
			trial[i] = [3]float64{q[0] / nq, q[1] / nq, q[2] / nq}
		}
		et := energy(trial, nil)
		if et < e {
			rel := (e - et) / e
			p, trial = trial, p
			e = energy(p, grad)
			step *= 1.5
			if rel < 1e-14 {
				break
			}
		} else {
			step *= 0.5
		}
	}
	out := make([][][3]float64, shells)
	for s := range out {
		out[s] = make([][3]float64, 0, perShell)
	}
	for i, q := range p {
		if q[2] < 0 {
			q = [3]float64{-q[0], -q[1], -q[2]}
		}
		out[shell(i)] = append(out[shell(i)], q)
	}
	return out
}
