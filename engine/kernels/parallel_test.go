package kernels

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// TestLimitParallelism: inside a section limited to 1 core every kernel
// call runs inline on its caller (one piece); overlapping sections apply
// the lowest open cap; after the last one closes, large calls are split
// over GOMAXPROCS again.
func TestLimitParallelism(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs GOMAXPROCS ≥ 2 to see a split")
	}
	pieces := func() int64 {
		var n atomic.Int64
		ParallelFor(1<<16, func(lo, hi int) { n.Add(1) })
		return n.Load()
	}
	LimitParallelism(1)
	if got := pieces(); got != 1 {
		t.Errorf("cap 1: ParallelFor ran %d pieces, want 1", got)
	}
	if numChunks(1<<20, 1) != 1 {
		t.Error("cap 1: numChunks splits")
	}
	LimitParallelism(2) // a second, overlapping section with a higher cap
	if got := procs(); got != 1 {
		t.Errorf("sections with caps 1 and 2 open: %d cores, want 1", got)
	}
	UnlimitParallelism(1) // the first section closes before the second
	if got, want := procs(), min(2, runtime.GOMAXPROCS(0)); got != want {
		t.Errorf("section with cap 2 open: %d cores, want %d", got, want)
	}
	UnlimitParallelism(2)
	if got := procs(); got != runtime.GOMAXPROCS(0) {
		t.Errorf("no section open: %d cores, want GOMAXPROCS %d", got, runtime.GOMAXPROCS(0))
	}
	if got := pieces(); got < 2 {
		t.Errorf("no cap: ParallelFor ran %d piece(s), want a split", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("UnlimitParallelism without LimitParallelism did not panic")
		}
	}()
	UnlimitParallelism(3)
}
