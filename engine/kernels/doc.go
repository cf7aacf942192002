// Package kernels provides the low-level numerical kernels of prism's neural
// engine: matrix multiply, bias, LayerNorm, AdaLN modulation, GELU, fused
// multi-head attention, elementwise helpers and loss functions, each with a
// hand-derived backward, on plain row-major []float32 slices.
//
// Conventions (the engine's tape relies on them):
//   - Row-major everywhere; activations are [B, T, D] contiguous unless a row
//     stride is given.
//   - Forward kernels overwrite their outputs; ALL backward kernels
//     accumulate (+=) into their gradient outputs.
//   - Kernels do not allocate after warm-up (arguments travel to worker
//     goroutines in pooled job structs) and split their work over GOMAXPROCS
//     goroutines when it is large enough to pay for the hand-off.
//   - Invalid lengths are programming errors and panic, as in gonum's BLAS.
//
// Backends. Every kernel has a portable pure-Go implementation (ref.go,
// generic over float32 and float64: the float64 instance is checked against
// finite differences, the float32 instance is what CGO_ENABLED=0 builds run
// and the reference the fast kernels are tested against). With cgo (the
// default) the kernels are C code compiled with -O3 -march=native and
// OpenBLAS's cblas_sgemm; without cgo Sgemm is gonum's. Backend reports which.
//
// Threading policy. Sgemm is parallelised by OpenBLAS itself over all cores;
// the other kernels are parallelised by this package's persistent worker
// goroutines (ParallelFor). Both never run at the same time as long as Sgemm
// is called from ordinary (not ParallelFor) goroutines, so the two cores are
// never oversubscribed. Code that wants many small independent products in
// parallel should call SetBLASThreads(1) and use ParallelFor around Sgemm.
package kernels
