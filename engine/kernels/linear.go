package kernels

// LinearForward computes the linear layer z = x·w + bias for the m×k input
// x (row stride ldx) and the k×n weights w (row stride ldw), writing z as a
// contiguous m×n matrix; bias nil adds nothing. When y is not nil it also
// writes y = GELU(z) (m×n), exactly what BiasGELUForward does, so that the
// backward is BiasGELUBackward(dy, z, ...) followed by the two Sgemm
// products. With cgo and the network's (skinny) shapes the bias and GELU
// are applied while each output tile is still in registers: one pass over
// the output instead of three (Sgemm, bias, GELU).
func LinearForward(m, n, k int, x []float32, ldx int, w []float32, ldw int, bias, z, y []float32) {
	checkGemm(false, false, m, n, k, x, ldx, w, ldw, z, n)
	checkOpt("bias", bias, n)
	checkOpt("y", y, m*n)
	if m == 0 || n == 0 {
		return
	}
	if linearFused(m, n, k, x, ldx, w, ldw, bias, z, y) {
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
