package engine

import (
	"math/rand/v2"
	"testing"
)

// Benchmarks of one decoder block of the reference network (issue 2):
// model_dim 64, 4 heads × 16, MLP 4×, 51 tokens, cross-attention to 10
// encoder tokens, AdaLN on a 64-dim context, batch 256.
//
//	go test -run '^$' -bench Block -benchmem ./engine

const (
	benchB, benchT, benchTk, benchD, benchCtx, benchHeads = 256, 51, 10, 64, 64, 4
)

// blockFlops counts the multiply-adds ×2 of one block's forward pass
// (matrix products and attention scores/mixing; elementwise work ignored).
func blockFlops(b, t, tk, d, ctx int) float64 {
	rows, cond := float64(b*t), float64(b)
	hc := float64(max(ctx, 2*d))
	fd := float64(d)
	lin := rows*fd*3*fd + rows*fd*fd + // qkv, out
		rows*fd*fd + float64(b*tk)*fd*2*fd + rows*fd*fd + // cross q, kv, out
		rows*fd*4*fd*2 + // MLP
		2*cond*(float64(ctx)*hc+hc*2*fd) // two AdaLN conditioning MLPs
	attn := float64(b)*float64(t*t)*fd*2 + float64(b)*float64(t*tk)*fd*2
	return 2 * (lin + attn)
}

func benchSetup(b *testing.B, batch int) (*testBlock, []float32, []float32, []float32, Mask) {
	r := rand.New(rand.NewPCG(50, 1))
	store := NewParamStore(r)
	blk := newTestBlock(store.Scope("blk"), benchD, benchCtx, benchHeads)
	x, y, ctx := randData(r, batch*benchT*benchD), randData(r, batch*benchTk*benchD), randData(r, batch*benchCtx)
	return blk, x, y, ctx, randomBlockMask(r, batch, benchT)
}

// BenchmarkBlockTrain is forward + backward of one block (3× the forward
// FLOPs are reported as GFLOP/s).
func BenchmarkBlockTrain(b *testing.B) {
	blk, x, y, ctx, mask := benchSetup(b, benchB)
	g := NewGraph()
	flops := 3 * blockFlops(benchB, benchT, benchTk, benchD, benchCtx)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		g.Reset()
		out := blk.forward(g, g.Input(x, benchB, benchT, benchD), g.Input(y, benchB, benchTk, benchD), g.Input(ctx, benchB, benchCtx), mask, Mask{})
		g.Backward(g.Mean(out))
	}
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkBlockInference is the tape-free forward pass at batch 1000 (the
// parameter decoder's sampling batch in the benchmark script).
func BenchmarkBlockInference(b *testing.B) {
	const batch = 1000
	blk, x, y, ctx, mask := benchSetup(b, batch)
	g := NewInferenceGraph()
	flops := blockFlops(batch, benchT, benchTk, benchD, benchCtx)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		g.Reset()
		blk.forward(g, g.Input(x, batch, benchT, benchD), g.Input(y, batch, benchTk, benchD), g.Input(ctx, batch, benchCtx), mask, Mask{})
	}
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
