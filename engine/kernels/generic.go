package kernels

// Generic reference kernels. These are the portable implementations the fast
// kernels are tested against, exported (serial, unoptimised, allocation-free)
// so that callers can run whole networks in float64 — e.g. to check a tape's
// gradients against central finite differences without float32 rounding.
// Arguments and conventions are those of the float32 kernels of the same
// name without the Ref suffix.

// Float is the element type of the generic reference kernels.
type Float interface{ ~float32 | ~float64 }

// SgemmRef is Sgemm for any Float type (naive triple loop).
func SgemmRef[T Float](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s T
			for p := 0; p < k; p++ {
				var av, bv T
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += av * bv
			}
			if beta == 0 {
				c[i*ldc+j] = alpha * s
			} else {
				c[i*ldc+j] = alpha*s + beta*c[i*ldc+j]
			}
		}
	}
}

// AddBiasRef is AddBias for any Float type.
func AddBiasRef[T Float](y []T, rows, n int, bias []T) { addBiasRef(y, 0, rows, n, bias) }

// BiasGradRef is BiasGrad for any Float type.
func BiasGradRef[T Float](dy []T, rows, n int, dbias []T) { biasGradRef(dy, 0, rows, n, dbias) }

// LayerNormForwardRef is LayerNormForward for any Float type.
func LayerNormForwardRef[T Float](x []T, rows, dim int, gamma, beta []T, eps T, y, mean, rstd []T) {
	layerNormFwdRef(x, 0, rows, dim, gamma, beta, eps, y, mean, rstd)
}

// LayerNormBackwardRef is LayerNormBackward for any Float type.
func LayerNormBackwardRef[T Float](dy, x, mean, rstd, gamma []T, rows, dim int, dx, dgamma, dbeta []T) {
	layerNormBwdRef(dy, x, mean, rstd, gamma, 0, rows, dim, dx, dgamma, dbeta)
}

// ModulateForwardRef is ModulateForward for any Float type.
func ModulateForwardRef[T Float](h, s, c []T, b, t, d int, y []T) {
	modulateFwdRef(h, s, c, 0, b, t, d, y)
}

// ModulateBackwardRef is ModulateBackward for any Float type.
func ModulateBackwardRef[T Float](dy, h, s []T, b, t, d int, dh, ds, dc []T) {
	modulateBwdRef(dy, h, s, 0, b, t, d, dh, ds, dc)
}

// LayerNormModulateForwardRef is LayerNormModulateForward for any Float type.
func LayerNormModulateForwardRef[T Float](x []T, b, t, d int, gamma, beta, s, c []T, eps T, y, mean, rstd []T) {
	layerNormModFwdRef(x, 0, b, t, d, gamma, beta, s, c, eps, y, mean, rstd)
}

// LayerNormModulateBackwardRef is LayerNormModulateBackward for any Float
// type; scratch must hold 2·d elements.
func LayerNormModulateBackwardRef[T Float](dy, x, mean, rstd, gamma, beta, s []T, b, t, d int, dx, dgamma, dbeta, ds, dc, scratch []T) {
	layerNormModBwdRef(dy, x, mean, rstd, gamma, beta, s, 0, b, t, d, dx, dgamma, dbeta, ds, dc, scratch)
}

// GELUForwardRef is GELUForward for any Float type.
func GELUForwardRef[T Float](x, y []T) { geluFwdRef(x, y) }

// GELUBackwardRef is GELUBackward for any Float type.
func GELUBackwardRef[T Float](dy, x, dx []T) { geluBwdRef(dy, x, dx) }

// BiasGELUForwardRef is BiasGELUForward for any Float type.
func BiasGELUForwardRef[T Float](z []T, rows, n int, bias, y []T) {
	biasGELUFwdRef(z, 0, rows, n, bias, y)
}

// BiasGELUBackwardRef is BiasGELUBackward for any Float type.
func BiasGELUBackwardRef[T Float](dy, z []T, rows, n int, dz, dbias []T) {
	biasGELUBwdRef(dy, z, 0, rows, n, dz, dbias)
}

// AttentionForwardRef is AttentionForward for any Float type; probs must not
// be nil.
func AttentionForwardRef[T Float](s AttnShape, q, k, v []T, m Mask, out, probs []T) {
	s = s.norm()
	attnFwdRef(s, q, k, v, m, out, probs, 0, s.B*s.H, nil)
}

// AttentionBackwardRef is AttentionBackward for any Float type.
func AttentionBackwardRef[T Float](s AttnShape, q, k, v, probs, out, dout []T, dq, dk, dv []T) {
	s = s.norm()
	attnBwdRef(s, q, k, v, probs, out, dout, 0, s.B*s.H, dq, dk, dv)
}
