package kernels

import "math"

// This file holds the portable reference implementations. They are generic
// over float32 and float64: the float32 instances are the CGO_ENABLED=0
// kernels and the reference the C kernels are tested against; the float64
// instances are checked against central finite differences. Every function
// works on a range of rows (or (batch, head) pairs) so that parallel callers
// can split the work without further copies.

func sqrtT[T Float](x T) T { return T(math.Sqrt(float64(x))) }
func expT[T Float](x T) T  { return T(math.Exp(float64(x))) }
func tanhT[T Float](x T) T { return T(math.Tanh(float64(x))) }

// addBiasRef adds bias to rows [lo, hi) of the rows×n matrix y.
func addBiasRef[T Float](y []T, lo, hi, n int, bias []T) {
	for r := lo; r < hi; r++ {
		row := y[r*n : (r+1)*n]
		for j, b := range bias[:n] {
			row[j] += b
		}
	}
}

// biasGradRef accumulates the column sums of rows [lo, hi) of dy into dbias.
func biasGradRef[T Float](dy []T, lo, hi, n int, dbias []T) {
	for r := lo; r < hi; r++ {
		row := dy[r*n : (r+1)*n]
		for j, v := range row {
			dbias[j] += v
		}
	}
}

// layerNormFwdRef normalises rows [lo, hi). mean and rstd may be nil.
func layerNormFwdRef[T Float](x []T, lo, hi, dim int, gamma, beta []T, eps T, y, mean, rstd []T) {
	for r := lo; r < hi; r++ {
		xr := x[r*dim : (r+1)*dim]
		yr := y[r*dim : (r+1)*dim]
		var m T
		for _, v := range xr {
			m += v
		}
		m /= T(dim)
		var v2 T
		for _, v := range xr {
			d := v - m
			v2 += d * d
		}
		v2 /= T(dim)
		rs := 1 / sqrtT(v2+eps)
		for j, v := range xr {
			h := (v - m) * rs
			if gamma != nil {
				h *= gamma[j]
			}
			if beta != nil {
				h += beta[j]
			}
			yr[j] = h
		}
		if mean != nil {
			mean[r] = m
		}
		if rstd != nil {
			rstd[r] = rs
		}
	}
}

// layerNormBwdRef accumulates dx (if non-nil) for rows [lo, hi) and, when non-nil, the
// parameter gradients of those rows into dgamma and dbeta.
func layerNormBwdRef[T Float](dy, x, mean, rstd, gamma []T, lo, hi, dim int, dx, dgamma, dbeta []T) {
	for r := lo; r < hi; r++ {
		dyr := dy[r*dim : (r+1)*dim]
		xr := x[r*dim : (r+1)*dim]
		m, rs := mean[r], rstd[r]
		// g = dy·γ; dx = rstd·(g − mean(g) − x̂·mean(g·x̂)).
		var sg, sgx T
		for j, v := range xr {
			h := (v - m) * rs
			g := dyr[j]
			if gamma != nil {
				g *= gamma[j]
			}
			sg += g
			sgx += g * h
			if dgamma != nil {
				dgamma[j] += dyr[j] * h
			}
			if dbeta != nil {
				dbeta[j] += dyr[j]
			}
		}
		if dx == nil {
			continue
		}
		dxr := dx[r*dim : (r+1)*dim]
		sg /= T(dim)
		sgx /= T(dim)
		for j, v := range xr {
			h := (v - m) * rs
			g := dyr[j]
			if gamma != nil {
				g *= gamma[j]
			}
			dxr[j] += rs * (g - sg - h*sgx)
		}
	}
}

// modulateFwdRef computes y = h·(1+s) + c for batches [lo, hi).
func modulateFwdRef[T Float](h, s, c []T, lo, hi, t, d int, y []T) {
	for b := lo; b < hi; b++ {
		sb, cb := s[b*d:(b+1)*d], c[b*d:(b+1)*d]
		for i := b * t; i < (b+1)*t; i++ {
			hr, yr := h[i*d:(i+1)*d], y[i*d:(i+1)*d]
			for j := range hr {
				yr[j] = hr[j]*(1+sb[j]) + cb[j]
			}
		}
	}
}

// modulateBwdRef accumulates dh, ds, dc (each may be nil) for batches [lo, hi).
func modulateBwdRef[T Float](dy, h, s []T, lo, hi, t, d int, dh, ds, dc []T) {
	for b := lo; b < hi; b++ {
		sb := s[b*d : (b+1)*d]
		for i := b * t; i < (b+1)*t; i++ {
			dyr, hr := dy[i*d:(i+1)*d], h[i*d:(i+1)*d]
			for j, g := range dyr {
				if dh != nil {
					dh[i*d+j] += g * (1 + sb[j])
				}
				if ds != nil {
					ds[b*d+j] += g * hr[j]
				}
				if dc != nil {
					dc[b*d+j] += g
				}
			}
		}
	}
}

// layerNormModFwdRef is LayerNorm (γ, β) followed by modulation with s, c
// over batches [lo, hi); x is [B, t, d], mean and rstd [B·t] (may be nil).
func layerNormModFwdRef[T Float](x []T, lo, hi, t, d int, gamma, beta, s, c []T, eps T, y, mean, rstd []T) {
	layerNormFwdRef(x, lo*t, hi*t, d, gamma, beta, eps, y, mean, rstd)
	modulateFwdRef(y, s, c, lo, hi, t, d, y)
}

// layerNormModBwdRef is the backward of layerNormModFwdRef for batches
// [lo, hi). It needs scratch of 2·d elements.
func layerNormModBwdRef[T Float](dy, x, mean, rstd, gamma, beta, s []T, lo, hi, t, d int, dx, dgamma, dbeta, ds, dc []T, scratch []T) {
	ln, dln := scratch[:d], scratch[d:2*d]
	for b := lo; b < hi; b++ {
		sb := s[b*d : (b+1)*d]
		for i := b * t; i < (b+1)*t; i++ {
			// Recompute the LayerNorm output of this row from the saved
			// statistics, then chain through the modulation.
			m, rs := mean[i], rstd[i]
			xr := x[i*d : (i+1)*d]
			for j := range ln {
				v := (xr[j] - m) * rs
				if gamma != nil {
					v *= gamma[j]
				}
				if beta != nil {
					v += beta[j]
				}
				ln[j] = v
			}
			dyr := dy[i*d : (i+1)*d]
			for j, g := range dyr {
				dln[j] = g * (1 + sb[j])
				if ds != nil {
					ds[b*d+j] += g * ln[j]
				}
				if dc != nil {
					dc[b*d+j] += g
				}
			}
			var dxr []T
			if dx != nil {
				dxr = dx[i*d : (i+1)*d]
			}
			layerNormBwdRef(dln, xr, mean[i:i+1], rstd[i:i+1], gamma, 0, 1, d, dxr, dgamma, dbeta)
		}
	}
}

const (
	geluC0 = 0.7978845608028654 // √(2/π)
	geluC1 = 0.044715
)

// geluFwdRef is the tanh approximation 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))).
func geluFwdRef[T Float](x, y []T) {
	for i, v := range x {
		y[i] = 0.5 * v * (1 + tanhT(T(geluC0)*(v+T(geluC1)*v*v*v)))
	}
}

// geluGrad is d/dx of the tanh-approximated GELU.
func geluGrad[T Float](v T) T {
	u := T(geluC0) * (v + T(geluC1)*v*v*v)
	th := tanhT(u)
	du := T(geluC0) * (1 + 3*T(geluC1)*v*v)
	return 0.5*(1+th) + 0.5*v*(1-th*th)*du
}

// geluBwdRef accumulates dx += dy·gelu'(x).
func geluBwdRef[T Float](dy, x, dx []T) {
	for i, v := range x {
		dx[i] += dy[i] * geluGrad(v)
	}
}

// biasGELUFwdRef adds bias to rows [lo, hi) of z in place and writes y = gelu(z).
func biasGELUFwdRef[T Float](z []T, lo, hi, n int, bias, y []T) {
	if bias != nil {
		addBiasRef(z, lo, hi, n, bias)
	}
	geluFwdRef(z[lo*n:hi*n], y[lo*n:hi*n])
}

// biasGELUBwdRef accumulates dz += dy·gelu'(z) and dbias += column sums of it
// for rows [lo, hi).
func biasGELUBwdRef[T Float](dy, z []T, lo, hi, n int, dz, dbias []T) {
	for r := lo; r < hi; r++ {
		for j := 0; j < n; j++ {
			g := dy[r*n+j] * geluGrad(z[r*n+j])
			if dz != nil {
				dz[r*n+j] += g
			}
			if dbias != nil {
				dbias[j] += g
			}
		}
	}
}

// attnAllowed reports whether query i of batch b may attend key j.
func (m Mask) allowed(b, i, j, tk int) bool {
	return m.Allow == nil || m.Allow[b*m.BatchStride+i*tk+j]
}

// attnFwdRef computes attention for the (batch, head) pairs [lo, hi),
// indexed b·H + h. probs is the full [B, H, Tq, Tk] buffer; when it is nil
// the probabilities of one row at a time go to scratch (Tk elements).
func attnFwdRef[T Float](s AttnShape, q, k, v []T, m Mask, out, probs []T, lo, hi int, scratch []T) {
	scale := 1 / sqrtT(T(s.Dh))
	for bh := lo; bh < hi; bh++ {
		b, h := bh/s.H, bh%s.H
		for i := 0; i < s.Tq; i++ {
			qi := q[(b*s.Tq+i)*s.LdQ+h*s.Dh:][:s.Dh]
			var p []T
			if probs != nil {
				p = probs[(bh*s.Tq+i)*s.Tk:][:s.Tk]
			} else {
				p = scratch[:s.Tk]
			}
			mx := T(math.Inf(-1))
			for j := 0; j < s.Tk; j++ {
				if !m.allowed(b, i, j, s.Tk) {
					continue
				}
				kj := k[(b*s.Tk+j)*s.LdK+h*s.Dh:][:s.Dh]
				var dot T
				for d := range qi {
					dot += qi[d] * kj[d]
				}
				p[j] = dot * scale
				mx = max(mx, p[j])
			}
			var sum T
			for j := 0; j < s.Tk; j++ {
				if m.allowed(b, i, j, s.Tk) {
					p[j] = expT(p[j] - mx)
					sum += p[j]
				} else {
					p[j] = 0
				}
			}
			o := out[(b*s.Tq+i)*s.LdO+h*s.Dh:][:s.Dh]
			clear(o)
			if sum == 0 {
				continue // no allowed key: zero output, zero probabilities
			}
			inv := 1 / sum
			for j := 0; j < s.Tk; j++ {
				p[j] *= inv
				if p[j] == 0 {
					continue
				}
				vj := v[(b*s.Tk+j)*s.LdV+h*s.Dh:][:s.Dh]
				for d := range o {
					o[d] += p[j] * vj[d]
				}
			}
		}
	}
}

// attnBwdRef accumulates dq, dk, dv for the (batch, head) pairs [lo, hi).
func attnBwdRef[T Float](s AttnShape, q, k, v, probs, out, dout []T, lo, hi int, dq, dk, dv []T) {
	scale := 1 / sqrtT(T(s.Dh))
	for bh := lo; bh < hi; bh++ {
		b, h := bh/s.H, bh%s.H
		for i := 0; i < s.Tq; i++ {
			p := probs[(bh*s.Tq+i)*s.Tk:][:s.Tk]
			do := dout[(b*s.Tq+i)*s.LdO+h*s.Dh:][:s.Dh]
			o := out[(b*s.Tq+i)*s.LdO+h*s.Dh:][:s.Dh]
			qi := q[(b*s.Tq+i)*s.LdQ+h*s.Dh:][:s.Dh]
			dqi := dq[(b*s.Tq+i)*s.LdQ+h*s.Dh:][:s.Dh]
			// Σ_j p_j·dp_j = dout·out because out = Σ_j p_j v_j.
			var delta T
			for d := range do {
				delta += do[d] * o[d]
			}
			for j := 0; j < s.Tk; j++ {
				if p[j] == 0 {
					continue
				}
				vj := v[(b*s.Tk+j)*s.LdV+h*s.Dh:][:s.Dh]
				kj := k[(b*s.Tk+j)*s.LdK+h*s.Dh:][:s.Dh]
				dvj := dv[(b*s.Tk+j)*s.LdV+h*s.Dh:][:s.Dh]
				dkj := dk[(b*s.Tk+j)*s.LdK+h*s.Dh:][:s.Dh]
				var dp T
				for d := range do {
					dp += do[d] * vj[d]
					dvj[d] += p[j] * do[d]
				}
				ds := p[j] * (dp - delta) * scale
				for d := range qi {
					dqi[d] += ds * kj[d]
					dkj[d] += ds * qi[d]
				}
			}
		}
	}
}
