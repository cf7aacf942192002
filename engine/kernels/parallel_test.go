package kernels

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// TestSetParallelism: with a cap of 1 every kernel call runs inline on its
// caller (one piece), the cap is returned for restoring, and without a cap
// large calls are split over GOMAXPROCS again.
func TestSetParallelism(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs GOMAXPROCS ≥ 2 to see a split")
	}
	pieces := func() int64 {
		var n atomic.Int64
		ParallelFor(1<<16, func(lo, hi int) { n.Add(1) })
		return n.Load()
	}
	prev := SetParallelism(1)
	defer SetParallelism(prev)
	if got := pieces(); got != 1 {
		t.Errorf("cap 1: ParallelFor ran %d pieces, want 1", got)
	}
	if numChunks(1<<20, 1) != 1 {
		t.Error("cap 1: numChunks splits")
	}
	if got := SetParallelism(0); got != 1 {
		t.Errorf("SetParallelism returned %d, want the previous cap 1", got)
	}
	if got := pieces(); got < 2 {
		t.Errorf("no cap: ParallelFor ran %d piece(s), want a split", got)
	}
}
