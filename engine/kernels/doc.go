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
// Threading policy. All parallelism belongs to this package: OpenBLAS runs
// single-threaded and Sgemm splits each large product over the package's
// persistent worker goroutines (one cgo call per worker), exactly like the
// other kernels. Multi-threaded OpenBLAS keeps its worker threads spinning
// (sched_yield) for a long while after every call; on two cores they then
// compete with the goroutines of the next LayerNorm or GELU (measured with
// BenchmarkSgemmThenGELU: a 13056×64×256 sgemm followed by a GELU over its
// output used 11–15 ms of CPU time with two OpenBLAS threads against 7 ms,
// the sum of the two alone, with the split). A single pool also means the cores are never
// oversubscribed and that Sgemm may be called inside ParallelFor bodies
// (nested work runs inline when the workers are busy). SetBLASThreads(n)
// hands threading back to OpenBLAS for callers that prefer it. Without
// cgo, Sgemm is gonum's, which parallelises itself.
package kernels
