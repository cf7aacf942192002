package kernels

import "fmt"

// checkGemm panics unless the Sgemm operands are large enough for their
// shapes and strides (row-major: A is m×k, or k×m when transposed).
func checkGemm(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("kernels: Sgemm negative dimension m=%d n=%d k=%d", m, n, k))
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	chk := func(name string, s []float32, rows, cols, ld int) {
		if ld < max(1, cols) {
			panic(fmt.Sprintf("kernels: Sgemm %s stride %d below %d columns", name, ld, cols))
		}
		if rows > 0 && cols > 0 && len(s) < (rows-1)*ld+cols {
			panic(fmt.Sprintf("kernels: Sgemm %s has length %d, need %d", name, len(s), (rows-1)*ld+cols))
		}
	}
	chk("A", a, ar, ac, lda)
	chk("B", b, br, bc, ldb)
	chk("C", c, m, n, ldc)
}
