package kernels

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/prismsbi/prism/internal/cputime"
)

// Benchmarks at the shapes of the reference network (batch 256, 51 tokens,
// model dim 64, 4 heads × 16, MLP width 256): go test -bench . ./engine/kernels/

const (
	benchB, benchT, benchH, benchDh = 256, 51, 4, 16
	benchRows                       = benchB * benchT // 13056
	benchD                          = benchH * benchDh
)

func benchBuf(n int) []float32 {
	x := make([]float32, n)
	r := newRNG(99)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// The machine is shared with other jobs, which makes wall-clock numbers
// noisy; each benchmark therefore also reports the CPU time it consumed per
// operation (cpu-ns/op, all threads), which is what the kernels cost when
// they have the cores to themselves (divide by the number of busy cores
// for the wall time).

// cpuStart records the process CPU time; pass it to reportCPU after the loop.
func cpuStart() float64 { return processCPU() }

func reportCPU(b *testing.B, start float64) {
	b.ReportMetric((processCPU()-start)*1e9/float64(b.N), "cpu-ns/op")
}

// reportGFLOPS reports flops per operation as GFLOP/s of wall time and per
// CPU-second (GFLOP/cpu-s).
func reportGFLOPS(b *testing.B, flops float64, start float64) {
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if cpu := processCPU() - start; cpu > 0 {
		b.ReportMetric(flops*float64(b.N)/cpu/1e9, "GFLOP/cpu-s")
	}
}

func BenchmarkSgemm(b *testing.B) { benchOwnAndOpenBLAS(b, benchSgemm) }

// benchOwnAndOpenBLAS runs bench as sub-benchmark "own" and, with cgo,
// again as "openblas" with the own kernel switched off, for comparison.
func benchOwnAndOpenBLAS(b *testing.B, bench func(*testing.B)) {
	b.Run("own", bench)
	if Backend == "c" {
		b.Run("openblas", func(b *testing.B) {
			defer setOwnGemm(setOwnGemm(false))
			bench(b)
		})
	}
}

func benchSgemm(b *testing.B) {
	const m = benchRows
	for _, kn := range [][2]int{{64, 64}, {64, 192}, {64, 256}, {256, 64}} {
		k, n := kn[0], kn[1]
		x, w, y := benchBuf(m*k), benchBuf(k*n), benchBuf(m*n)
		dx, dw := make([]float32, m*k), make([]float32, k*n)
		// Forward Y = X·W, then the two backward products dX = dY·Wᵀ and
		// dW = Xᵀ·dY, all at m·n·k multiply-adds.
		b.Run(fmt.Sprintf("fwd_M%d_K%d_N%d", m, k, n), func(b *testing.B) {
			c0 := cpuStart()
			for b.Loop() {
				Sgemm(false, false, m, n, k, 1, x, k, w, n, 0, y, n)
			}
			reportGFLOPS(b, 2*float64(m*n*k), c0)
		})
		b.Run(fmt.Sprintf("dX_M%d_K%d_N%d", m, k, n), func(b *testing.B) {
			c0 := cpuStart()
			for b.Loop() {
				Sgemm(false, true, m, k, n, 1, y, n, w, n, 1, dx, k)
			}
			reportGFLOPS(b, 2*float64(m*n*k), c0)
		})
		b.Run(fmt.Sprintf("dW_M%d_K%d_N%d", m, k, n), func(b *testing.B) {
			c0 := cpuStart()
			for b.Loop() {
				Sgemm(true, false, k, n, m, 1, x, k, y, n, 1, dw, n)
			}
			reportGFLOPS(b, 2*float64(m*n*k), c0)
		})
	}
}

// BenchmarkSgemmWideHead is the forward product of a categorical model
// decoder's head (bszt: C·D = 12·64 inputs, 2,048 classes) at a training
// batch and an inference chunk. Since n > 1024 went to the own kernel
// (batch-independent rows) this compares it with OpenBLAS on that shape.
func BenchmarkSgemmWideHead(b *testing.B) {
	benchOwnAndOpenBLAS(b, func(b *testing.B) {
		const k, n = 768, 2048
		for _, m := range []int{32, 1000} {
			x, w, y := benchBuf(m*k), benchBuf(k*n), benchBuf(m*n)
			b.Run(fmt.Sprintf("fwd_M%d_K%d_N%d", m, k, n), func(b *testing.B) {
				c0 := cpuStart()
				for b.Loop() {
					Sgemm(false, false, m, n, k, 1, x, k, w, n, 0, y, n)
				}
				reportGFLOPS(b, 2*float64(m*n*k), c0)
			})
		}
	})
}

// BenchmarkSgemmPeak measures the machine's sgemm peak on a large square
// product (the reference for "≥ 35 % of the machine's sgemm peak").
func BenchmarkSgemmPeak(b *testing.B) {
	const n = 2048
	a, c, d := benchBuf(n*n), benchBuf(n*n), make([]float32, n*n)
	c0 := cpuStart()
	for b.Loop() {
		Sgemm(false, false, n, n, n, 1, a, n, c, n, 0, d, n)
	}
	reportGFLOPS(b, 2*float64(n)*n*n, c0)
}

func randomBlockMask(bsz, t int) Mask {
	r := newRNG(7)
	a := make([]bool, bsz*t*t)
	for b := 0; b < bsz; b++ {
		active := make([]bool, t)
		for i := range active {
			active[i] = r.Float64() < 0.5
		}
		for i := 0; i < t; i++ {
			for j := 0; j < t; j++ {
				a[(b*t+i)*t+j] = active[i] == active[j]
			}
		}
	}
	return Mask{Allow: a, BatchStride: t * t}
}

func BenchmarkAttention(b *testing.B) {
	w := 3 * benchD
	s := AttnShape{B: benchB, Tq: benchT, Tk: benchT, H: benchH, Dh: benchDh, LdQ: w, LdK: w, LdV: w}
	qkv, dqkv := benchBuf(benchRows*w), make([]float32, benchRows*w)
	q, k, v := qkv, qkv[benchD:], qkv[2*benchD:]
	out, dout := make([]float32, benchRows*benchD), benchBuf(benchRows*benchD)
	probs := make([]float32, benchB*benchH*benchT*benchT)
	// Dense-equivalent FLOPs: q·kᵀ and p·v, 2·T²·Dh multiply-adds per
	// (batch, head) forward, twice that backward.
	fwdFlops := 4 * float64(benchB*benchH*benchT*benchT*benchDh)
	for _, mc := range []struct {
		name string
		m    Mask
	}{{"causal", CausalMask(benchT)}, {"block", randomBlockMask(benchB, benchT)}, {"none", Mask{}}} {
		b.Run("fwd_"+mc.name, func(b *testing.B) {
			c0 := cpuStart()
			for b.Loop() {
				AttentionForward(s, q, k, v, mc.m, out, probs)
			}
			reportGFLOPS(b, fwdFlops, c0)
		})
		b.Run("bwd_"+mc.name, func(b *testing.B) {
			AttentionForward(s, q, k, v, mc.m, out, probs)
			c0 := cpuStart()
			for b.Loop() {
				AttentionBackward(s, q, k, v, probs, out, dout, mc.m, dqkv, dqkv[benchD:], dqkv[2*benchD:])
			}
			reportGFLOPS(b, 2*fwdFlops, c0)
		})
	}
	// Autoregressive decoding step: one query per sequence over 50 cached
	// keys, batch 1000, no probabilities kept.
	ds := AttnShape{B: 1000, Tq: 1, Tk: 50, H: benchH, Dh: benchDh}
	dq, dkv := benchBuf(1000*benchD), benchBuf(1000*50*benchD)
	dout1 := make([]float32, 1000*benchD)
	b.Run("decode_B1000_Tk50", func(b *testing.B) {
		c0 := cpuStart()
		for b.Loop() {
			AttentionForward(ds, dq, dkv, dkv, Mask{}, dout1, nil)
		}
		reportGFLOPS(b, 4*float64(1000*benchH*50*benchDh), c0)
	})
	// Inference cross-attention as in the network's denoiser: a block of
	// 2048 queries (256 rows × 8 tokens) over the 105 encoder tokens of one
	// observation, no probabilities kept.
	xs := AttnShape{B: 1, Tq: 2048, Tk: 105, H: benchH, Dh: benchDh}
	xq, xkv := benchBuf(2048*benchD), benchBuf(105*benchD)
	xout := make([]float32, 2048*benchD)
	// Inference self-attention over the few tokens of each row (the
	// denoiser's 8 per row, fused QKV, 1000 rows).
	ss := AttnShape{B: 1000, Tq: 8, Tk: 8, H: benchH, Dh: benchDh, LdQ: 3 * benchD, LdK: 3 * benchD, LdV: 3 * benchD}
	sqkv, sout := benchBuf(1000*8*3*benchD), make([]float32, 1000*8*benchD)
	b.Run("self_B1000_T8", func(b *testing.B) {
		c0 := cpuStart()
		for b.Loop() {
			AttentionForward(ss, sqkv, sqkv[benchD:], sqkv[2*benchD:], Mask{}, sout, nil)
		}
		reportGFLOPS(b, 4*float64(1000*benchH*8*8*benchDh), c0)
	})
	// The same for one row chunk of network.DenoiseMasked (77 rows of the
	// full b3s model's 7 active tokens), whose operands stay in cache.
	cs := AttnShape{B: 77, Tq: 7, Tk: 7, H: benchH, Dh: benchDh, LdQ: 3 * benchD, LdK: 3 * benchD, LdV: 3 * benchD}
	b.Run("self_B77_T7", func(b *testing.B) {
		c0 := cpuStart()
		for b.Loop() {
			AttentionForward(cs, sqkv, sqkv[benchD:], sqkv[2*benchD:], Mask{}, sout, nil)
		}
		reportGFLOPS(b, 4*float64(77*benchH*7*7*benchDh), c0)
	})
	b.Run("cross_Tq2048_Tk105", func(b *testing.B) {
		c0 := cpuStart()
		for b.Loop() {
			AttentionForward(xs, xq, xkv, xkv, Mask{}, xout, nil)
		}
		reportGFLOPS(b, 4*float64(2048*benchH*105*benchDh), c0)
	})
	// Cross-attention of one observation's segment of 3 rows × 6 active
	// tokens (b3s ball + 2 sticks + noise): 18 queries, of which the last
	// two fill a padded group of four.
	ys := AttnShape{B: 1, Tq: 18, Tk: 105, H: benchH, Dh: benchDh}
	b.Run("cross_Tq18_Tk105", func(b *testing.B) {
		c0 := cpuStart()
		for b.Loop() {
			AttentionForward(ys, xq, xkv, xkv, Mask{}, xout, nil)
		}
		reportGFLOPS(b, 4*float64(18*benchH*105*benchDh), c0)
	})
}

func BenchmarkLayerNorm(b *testing.B) {
	x, y, dy, dx := benchBuf(benchRows*benchD), make([]float32, benchRows*benchD), benchBuf(benchRows*benchD), make([]float32, benchRows*benchD)
	g, be, dg, db := benchBuf(benchD), benchBuf(benchD), make([]float32, benchD), make([]float32, benchD)
	mean, rstd := make([]float32, benchRows), make([]float32, benchRows)
	b.Run("fwd", func(b *testing.B) {
		b.SetBytes(2 * 4 * benchRows * benchD)
		c0 := cpuStart()
		for b.Loop() {
			LayerNormForward(x, benchRows, benchD, g, be, 1e-5, y, mean, rstd)
		}
		reportCPU(b, c0)
	})
	b.Run("bwd", func(b *testing.B) {
		b.SetBytes(3 * 4 * benchRows * benchD)
		c0 := cpuStart()
		for b.Loop() {
			LayerNormBackward(dy, x, mean, rstd, g, benchRows, benchD, dx, dg, db)
		}
		reportCPU(b, c0)
	})
	s, c, ds, dc := benchBuf(benchB*benchD), benchBuf(benchB*benchD), make([]float32, benchB*benchD), make([]float32, benchB*benchD)
	b.Run("lnmod_fwd", func(b *testing.B) {
		b.SetBytes(2 * 4 * benchRows * benchD)
		c0 := cpuStart()
		for b.Loop() {
			LayerNormModulateForward(x, benchB, benchT, benchD, g, be, s, c, 1e-5, y, mean, rstd)
		}
		reportCPU(b, c0)
	})
	b.Run("lnmod_bwd", func(b *testing.B) {
		b.SetBytes(3 * 4 * benchRows * benchD)
		c0 := cpuStart()
		for b.Loop() {
			LayerNormModulateBackward(dy, x, mean, rstd, g, be, s, benchB, benchT, benchD, dx, dg, db, ds, dc)
		}
		reportCPU(b, c0)
	})
	b.Run("modulate_fwd", func(b *testing.B) {
		b.SetBytes(2 * 4 * benchRows * benchD)
		c0 := cpuStart()
		for b.Loop() {
			ModulateForward(x, s, c, benchB, benchT, benchD, y)
		}
		reportCPU(b, c0)
	})
	b.Run("modulate_bwd", func(b *testing.B) {
		b.SetBytes(3 * 4 * benchRows * benchD)
		c0 := cpuStart()
		for b.Loop() {
			ModulateBackward(dy, x, s, benchB, benchT, benchD, dx, ds, dc)
		}
		reportCPU(b, c0)
	})
}

func BenchmarkGELU(b *testing.B) {
	for _, n := range []int{benchD, 4 * benchD} {
		size := benchRows * n
		x, y, dy, dx := benchBuf(size), make([]float32, size), benchBuf(size), make([]float32, size)
		bias, dbias := benchBuf(n), make([]float32, n)
		b.Run(fmt.Sprintf("fwd_%dx%d", benchRows, n), func(b *testing.B) {
			b.SetBytes(int64(2 * 4 * size))
			c0 := cpuStart()
			for b.Loop() {
				GELUForward(x, y)
			}
			reportCPU(b, c0)
		})
		b.Run(fmt.Sprintf("bwd_%dx%d", benchRows, n), func(b *testing.B) {
			b.SetBytes(int64(3 * 4 * size))
			c0 := cpuStart()
			for b.Loop() {
				GELUBackward(dy, x, dx)
			}
			reportCPU(b, c0)
		})
		b.Run(fmt.Sprintf("biasgelu_fwd_%dx%d", benchRows, n), func(b *testing.B) {
			b.SetBytes(int64(3 * 4 * size))
			c0 := cpuStart()
			for b.Loop() {
				BiasGELUForward(x, benchRows, n, bias, y)
				Scale(0, bias) // keep x from drifting: bias 0 after the first call
			}
			reportCPU(b, c0)
		})
		b.Run(fmt.Sprintf("biasgelu_bwd_%dx%d", benchRows, n), func(b *testing.B) {
			b.SetBytes(int64(3 * 4 * size))
			c0 := cpuStart()
			for b.Loop() {
				BiasGELUBackward(dy, x, benchRows, n, dx, dbias)
			}
			reportCPU(b, c0)
		})
	}
}

func BenchmarkElementwise(b *testing.B) {
	size := benchRows * benchD
	x, y := benchBuf(size), benchBuf(size)
	b.Run("axpy", func(b *testing.B) {
		b.SetBytes(int64(3 * 4 * size))
		c0 := cpuStart()
		for b.Loop() {
			Axpy(1e-3, x, y)
		}
		reportCPU(b, c0)
	})
	b.Run("add", func(b *testing.B) {
		b.SetBytes(int64(3 * 4 * size))
		c0 := cpuStart()
		for b.Loop() {
			Add(y, x, y)
		}
		reportCPU(b, c0)
	})
}

// BenchmarkSgemmThenGELU alternates an OpenBLAS product with a goroutine-
// parallel kernel, as a training step does, to expose interference between
// OpenBLAS's worker threads (which spin for a while after each call) and this
// package's workers. Compare with the sum of the two benchmarks alone.
func BenchmarkSgemmThenGELU(b *testing.B) {
	const m, k, n = benchRows, 64, 256
	x, w, y, z := benchBuf(m*k), benchBuf(k*n), make([]float32, m*n), make([]float32, m*n)
	b.Run("sgemm", func(b *testing.B) {
		c0 := cpuStart()
		for b.Loop() {
			Sgemm(false, false, m, n, k, 1, x, k, w, n, 0, y, n)
		}
		reportCPU(b, c0)
	})
	b.Run("gelu", func(b *testing.B) {
		c0 := cpuStart()
		for b.Loop() {
			GELUForward(y, z)
		}
		reportCPU(b, c0)
	})
	for _, threads := range []int{1, 2} {
		// threads 1: the package's own split (default); 2: OpenBLAS threads.
		b.Run(fmt.Sprintf("both_blasthreads%d", threads), func(b *testing.B) {
			SetBLASThreads(threads)
			defer SetBLASThreads(1)
			c0 := cpuStart()
			for b.Loop() {
				Sgemm(false, false, m, n, k, 1, x, k, w, n, 0, y, n)
				GELUForward(y, z)
			}
			reportCPU(b, c0)
		})
	}
}

// BenchmarkLinearGELU compares the fused LinearForward (bias and GELU in
// the product's epilogue) with Sgemm followed by BiasGELUForward, for the
// MLP's first layer (13056×64 → 256).
func BenchmarkLinearGELU(b *testing.B) {
	const m, k, n = benchRows, benchD, 4 * benchD
	x, w, bias := benchBuf(m*k), benchBuf(k*n), benchBuf(n)
	z, y := make([]float32, m*n), make([]float32, m*n)
	b.Run("fused", func(b *testing.B) {
		c0 := cpuStart()
		for b.Loop() {
			LinearForward(m, n, k, x, k, w, n, bias, z, y)
		}
		reportGFLOPS(b, 2*float64(m*n*k), c0)
	})
	b.Run("composed", func(b *testing.B) {
		c0 := cpuStart()
		for b.Loop() {
			Sgemm(false, false, m, n, k, 1, x, k, w, n, 0, z, n)
			BiasGELUForward(z, m, n, bias, y)
		}
		reportGFLOPS(b, 2*float64(m*n*k), c0)
	})
}

// processCPU is the process CPU time in seconds (0 where unreadable).
func processCPU() float64 {
	s, _ := cputime.Seconds()
	return s
}

// BenchmarkLinearChunk runs the parameter decoder's forward products at the
// sizes of one row chunk of network.DenoiseMasked (≈ 540 tokens, or half
// of that when a nested call is split in two pieces), serially as inside a
// chunk: QKV (64 → 192), the attention outputs (64 → 64), the MLP (64 →
// 256 with GELU, 256 → 64 with the residual).
func BenchmarkLinearChunk(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, m := range []int{270, 540} {
		for _, kn := range [][2]int{{64, 192}, {64, 64}, {64, 256}, {256, 64}} {
			k, n := kn[0], kn[1]
			x, w, bias, res := benchBuf(m*k), benchBuf(k*n), benchBuf(n), benchBuf(m*n)
			z, y := make([]float32, m*n), make([]float32, m*n)
			b.Run(fmt.Sprintf("M%d_K%d_N%d", m, k, n), func(b *testing.B) {
				c0 := cpuStart()
				for b.Loop() {
					switch {
					case n == 256:
						LinearForward(m, n, k, x, k, w, n, bias, z, y)
					case k == 256:
						LinearResidualForward(m, n, k, x, k, w, n, bias, res, z)
					default:
						LinearForward(m, n, k, x, k, w, n, bias, z, nil)
					}
				}
				reportGFLOPS(b, 2*float64(m*n*k), c0)
			})
		}
	}
}
