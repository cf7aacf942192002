package kernels

import (
	"runtime"
	"sync"
)

// runner is a unit of parallel work over an index range. Kernels implement it
// with pooled job structs so that a parallel kernel call allocates nothing: a
// pointer stored in an interface does not allocate, whereas a capturing
// closure handed to another goroutine always escapes to the heap.
type runner interface {
	// run processes indices [lo, hi); chunk is the index of this piece in
	// [0, numChunks(...)) and lets reductions use per-chunk partial buffers.
	run(chunk, lo, hi int)
}

type task struct {
	r             runner
	chunk, lo, hi int
	wg            *sync.WaitGroup
}

var (
	poolOnce sync.Once
	taskCh   chan task
	wgPool   = sync.Pool{New: func() any { return new(sync.WaitGroup) }}
)

// startWorkers starts NumCPU-1 persistent worker goroutines; the calling
// goroutine always processes the first chunk itself.
func startWorkers() {
	taskCh = make(chan task) // unbuffered: a send succeeds only if a worker is idle
	for i := 1; i < runtime.NumCPU(); i++ {
		go func() {
			for t := range taskCh {
				t.r.run(t.chunk, t.lo, t.hi)
				t.wg.Done()
			}
		}()
	}
}

// numChunks returns how many pieces parallelRun splits n items into when each
// piece should hold at least grain items.
func numChunks(n, grain int) int {
	if grain < 1 {
		grain = 1
	}
	p := runtime.GOMAXPROCS(0)
	if c := n / grain; c < p {
		p = c
	}
	if p < 1 {
		p = 1
	}
	return p
}

// parallelRun splits [0, n) into numChunks(n, grain) contiguous pieces and
// runs them concurrently, the first on the calling goroutine. A piece that
// cannot be handed to an idle worker (all busy, e.g. nested calls) runs
// inline, so nesting never deadlocks.
func parallelRun(n, grain int, r runner) {
	if n <= 0 {
		return
	}
	p := numChunks(n, grain)
	if p == 1 {
		r.run(0, 0, n)
		return
	}
	poolOnce.Do(startWorkers)
	wg := wgPool.Get().(*sync.WaitGroup)
	for c := 1; c < p; c++ {
		lo, hi := c*n/p, (c+1)*n/p
		wg.Add(1)
		select {
		case taskCh <- task{r: r, chunk: c, lo: lo, hi: hi, wg: wg}:
		default:
			wg.Done()
			r.run(c, lo, hi)
		}
	}
	r.run(0, 0, n/p)
	wg.Wait()
	wgPool.Put(wg)
}

type funcRunner func(lo, hi int)

func (f funcRunner) run(_, lo, hi int) { f(lo, hi) }

// ParallelFor splits [0, n) into at most GOMAXPROCS contiguous ranges and
// calls body on each concurrently (the first range on the calling goroutine),
// returning when all are done. It runs body(0, n) inline when n < 2 or
// GOMAXPROCS is 1. Only the closure passed in may allocate; the scheduling
// itself reuses persistent workers. Calls may be nested.
func ParallelFor(n int, body func(lo, hi int)) {
	parallelRun(n, 1, funcRunner(body))
}

// ParallelForGrain is ParallelFor with ranges of at least grain items, so
// that cheap bodies over small n run inline instead of paying for the
// hand-off (about a microsecond).
func ParallelForGrain(n, grain int, body func(lo, hi int)) {
	parallelRun(n, grain, funcRunner(body))
}
