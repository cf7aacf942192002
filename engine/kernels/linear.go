package kernels

// LinearForward computes the linear layer z = x·w + bias for the m×k input
// x (row stride ldx) and the k×n weights w (row stride ldw), writing z as a
// contiguous m×n matrix; bias nil adds nothing. When y is not nil it also
// writes y = GELU(z) (m×n), exactly what BiasGELUForward does, so that the
// backward is BiasGELUBackward(dy, z, ...) followed by the two Sgemm
// products. With cgo and the network's (skinny) shapes the bias and GELU
// are applied while each output tile is still in registers: one pass over
// the output instead of three (Sgemm, bias, GELU). y may be z itself
// (inference, where the pre-activation is not needed): z then receives
// GELU(x·w + bias) only, and the fused path skips a store per element.
func LinearForward(m, n, k int, x []float32, ldx int, w []float32, ldw int, bias, z, y []float32) {
	checkGemm(false, false, m, n, k, x, ldx, w, ldw, z, n)
	checkOpt("bias", bias, n)
	checkOpt("y", y, m*n)
	if m == 0 || n == 0 {
		return
	}
	if linearFused(m, n, k, x, ldx, w, ldw, bias, nil, z, y) {
		return
	}
	Sgemm(false, false, m, n, k, 1, x, ldx, w, ldw, 0, z, n)
	switch {
	case y != nil:
		BiasGELUForward(z, m, n, bias, y)
	case bias != nil:
		AddBias(z, m, n, bias)
	}
}

// LinearResidualForward computes z = res + (x·w + bias) for the m×k input x
// (row stride ldx), the k×n weights w (row stride ldw) and the contiguous
// m×n residual res, writing the contiguous m×n matrix z (which must not
// overlap res: the product may store partial sums in z before it reads
// res); bias nil adds nothing. It equals LinearForward followed by
// Add(z, res, z) bit for bit (the sums are formed in the same order); with
// cgo and the network's shapes the bias and the residual are added while
// each output tile is in registers, the whole residual branch of a
// transformer block in one pass over the output.
func LinearResidualForward(m, n, k int, x []float32, ldx int, w []float32, ldw int, bias, res, z []float32) {
	checkGemm(false, false, m, n, k, x, ldx, w, ldw, z, n)
	checkOpt("bias", bias, n)
	checkLen("res", res, m*n)
	if m == 0 || n == 0 {
		return
	}
	if linearFused(m, n, k, x, ldx, w, ldw, bias, res, z, nil) {
		return
	}
	LinearForward(m, n, k, x, ldx, w, ldw, bias, z, nil)
	Add(z[:m*n], res[:m*n], z[:m*n])
}
