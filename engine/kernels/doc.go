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
// default) the kernels are C code (kernels_body.h) compiled three times,
// for AVX-512, AVX2+FMA and the baseline instruction set, by target
// pragmas rather than -march, so that the binary runs on any x86-64 CPU;
// the best path the CPU supports is chosen at start-up and PRISM_KERNELS
// or SetPath forces one (Path, Paths; docs/engine.md). Sgemm is the
// package's own kernel for the network's products (see ownGemmFits) and
// OpenBLAS's cblas_sgemm otherwise; without cgo Sgemm is gonum's. Backend
// reports which. LinearForward fuses a linear layer's bias and GELU into
// the product's epilogue when the own kernel applies.
//
// Threading policy. All parallelism belongs to this package: OpenBLAS runs
// single-threaded and Sgemm splits each large product over the package's
// persistent worker goroutines (one cgo call per worker), exactly like the
// other kernels. Multi-threaded OpenBLAS keeps its worker threads spinning
// (sched_yield) for a long while after every call; on two cores they then
// compete with the goroutines of the next LayerNorm or GELU (measured with
// BenchmarkSgemmThenGELU, 5 runs each on the shared machine: a 13056×64×256
// sgemm followed by a GELU over its output used 7.7–8.6 ms of CPU time per
// pair with the split and 8.2–16.9 ms, median 9.9, with two OpenBLAS
// threads). A single pool also means the cores are never oversubscribed
// and that Sgemm may be called inside ParallelFor bodies (nested work runs
// inline when the workers are busy). SetBLASThreads(n)
// hands threading back to OpenBLAS for callers that prefer it. Without
// cgo, Sgemm is gonum's, which parallelises itself.
//
// Performance notes (what perf and the benchmarks taught; the machines are
// 2-vCPU VMs shared with other jobs, so the benchmarks also report CPU
// time per operation, which is steadier than wall time):
//   - gcc prefers 256-bit vectors even with AVX-512 enabled; the
//     "prefer-vector-width=512" target pragma of kernels_avx512.c doubles
//     the width (cgo's flag allowlist rejects -mprefer-vector-width).
//   - On the AVX2 and generic paths gcc keeps 16-lane vector types (the
//     AVX-512 path's pk_v16) in memory: every accumulator and every scalar
//     broadcast went through the stack (perf: vmovss stores and FMAs with
//     memory operands; the inference cross-attention ran at 4 GFLOP/s
//     against 96 with AVX-512). Those paths use native-width vectors
//     (pk_vf) for attention and the GEMM, and AVX2 intrinsics for the
//     Dh = 16 inference loops (cross-attention 54 GFLOP/cpu-s, backward
//     as fast as AVX-512's per FLOP).
//   - cgo also rejects -fno-math-errno and -fassociative-math, and
//     -ffast-math would break NaN/Inf handling; instead reductions are
//     marked "#pragma omp simd reduction" (-fopenmp-simd, no OpenMP
//     runtime) and exp is a branch-free polynomial, so IEEE semantics stay,
//     except for subnormals: every C kernel sets flush-to-zero and
//     denormals-are-zero for its duration (restoring the caller's MXCSR),
//     because operations on subnormals take microcode assists; a 20-minute
//     lingauss-k6 training slowed by a quarter as GELU′ underflowed.
//   - gcc unrolls 16-trip loops (Dh = 16) completely and then fails to
//     vectorise them: perf showed 16 scalar vfmadd231ss per key. Explicit
//     16-lane vector types made the attention forward 4–5× faster.
//     Accumulator arrays must have a fixed size and the vector type no
//     may_alias attribute, or they live in memory.
//   - A single FMA accumulation chain is latency bound (4 cycles per
//     step): scores, p·v and the backward keep 2–4 independent chains.
//   - Writing −Inf padding with scalar stores and reloading the block as a
//     vector stalled on store forwarding (16 % of the forward); masks are
//     applied in registers instead. Scalar transposes of K/V cost 10 %;
//     masked gathers replace them.
//   - The backward's per-(i, j) read-modify-write of dk/dv in memory was
//     load/store bound; a second pass over keys accumulates in registers.
//     Computing dq = ds·k and out = p·v four queries at a time (each k_j or
//     v_j load feeding four FMA chains) then doubled the backward and sped
//     up the forward by 1.4×.
//   - Inference attention (probs == nil) works on tiles of ≤ 4096 floats
//     of probabilities in the stack scratch instead of all Tq rows, so
//     nothing is allocated per call (the kernel speed did not change
//     measurably), and for Dh = 16 computes the scores of four queries
//     over two 16-key blocks per step (1.15× on BenchmarkAttention/cross).
//     Tried and dropped: untransposed scores for Tq < 16 (slower), and
//     scaling P·V by 1/Σ instead of normalising the rows (≤ 3 %, noise).
//     Tiny-T self-attention (BenchmarkAttention/self_B1000_T8, ≈ 12
//     GFLOP/cpu-s) has a flat profile; its largest item is the first
//     touch of the strided q rows.
//   - On the reference training step OpenBLAS spent 14 % of the step
//     packing operands and 3 % zeroing C for beta = 0 around 24 % in its
//     compute kernel: for K = 64 the packing is not amortised. The own
//     kernel (12×32 register tile) packs only small pieces inside the loop
//     that uses them — op(B) once per call, a 12-row tile of op(A) before
//     it sweeps B — and writes C (plus bias and GELU) directly. A first
//     version that read A and B in place was as fast on an idle core but
//     half as fast as OpenBLAS whenever the sibling hyperthread was busy
//     (the strided rows fell out of the shared L1); packed, it stays ahead
//     in both conditions (see BenchmarkSgemm's own/openblas pairs).
//   - Multi-threaded OpenBLAS leaves its threads spinning after each call,
//     stealing the next kernel's cores; hence the threading policy above.
//   - Go-side: a goroutine per piece or a capturing closure allocates on
//     every call; persistent workers fed pooled job structs do not, and
//     claiming pieces dynamically keeps a call from waiting for a worker
//     whose core is busy elsewhere.
package kernels
