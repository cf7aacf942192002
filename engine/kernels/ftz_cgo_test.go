//go:build cgo && (amd64 || 386)

package kernels

import (
	"runtime"
	"testing"
)

// TestKernelsFlushSubnormals: the C kernels treat float32 subnormals as
// zero (DAZ) and flush subnormal results (FTZ), and restore the caller's
// floating-point state, so Go code on the same thread keeps gradual
// underflow.
func TestKernelsFlushSubnormals(t *testing.T) {
	runtime.LockOSThread() // the Go check below must run on the kernel's thread
	defer runtime.UnlockOSThread()
	sub := []float32{1e-39, -3e-40} // subnormal: below 1.1754944e-38
	y := []float32{0, 0}
	Axpy(1, sub, y)
	if y[0] != 0 || y[1] != 0 {
		t.Errorf("Axpy of subnormals gave %v, want zeros (denormals-are-zero)", y)
	}
	norm := []float32{1e-20, 2e-20} // normal inputs whose product is subnormal
	out := []float32{0}
	Sgemm(false, false, 1, 1, 2, 1, norm, 2, []float32{1e-20, 1e-20}, 1, 0, out, 1)
	if out[0] != 0 {
		t.Errorf("Sgemm with a subnormal result gave %g, want 0 (flush-to-zero)", out[0])
	}
	// Normal values are untouched.
	Axpy(2, []float32{1.5e-38}, out)
	if out[0] != 3e-38 {
		t.Errorf("Axpy of normal values gave %g, want 3e-38", out[0])
	}
	// And Go's own arithmetic still underflows gradually after the calls.
	half := []float32{1.5e-38}
	if g := half[0] / 16; g == 0 {
		t.Error("Go float32 division flushed a subnormal: the kernels leaked FTZ into the caller")
	}
}
