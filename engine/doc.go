// Package engine is prism's compact neural-network engine: float32 tensors,
// a reverse-mode autodiff tape over a fixed set of fused operations, an
// arena that makes a training step allocate (almost) nothing after warm-up,
// a tape-free inference mode with key/value caching, and a named parameter
// store with initialisers and checkpointing.
//
// It is deliberately not a general framework. Every operation the PRISM
// transformers need is written out once, forward and backward side by side,
// as a thin wrapper over the allocation-free kernels of engine/kernels
// (OpenBLAS sgemm through cgo, pure Go otherwise).
//
// A training step reads
//
//	g := engine.NewGraph()
//	for step := range steps {
//		x := g.Input(batch.X, b, t, d)
//		h := g.Linear(x, w, bias)
//		...
//		loss := g.Mean(g.BCEWithLogits(logits, targets))
//		params.ZeroGrad()
//		g.Backward(loss)
//		opt.Step(...)
//		g.Reset() // keeps every buffer for the next step
//	}
//
// Tensors created by a Graph are owned by it and become invalid at Reset;
// parameters live in a ParamStore and persist. Shape errors are programming
// errors and panic with a message naming the operation, like gonum/mat.
//
// Conventions: row-major storage; a Linear weight is stored [in, out];
// attention tensors are [B, T, H·Dh] with heads contiguous in the last axis;
// backward functions accumulate (+=) into gradient buffers, so gradients of
// tensors used twice add up. See docs/engine.md for the design.
package engine
