package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
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

// batch is one parallelRun call: its pieces are claimed dynamically from
// next by the calling goroutine and by any worker that joins, so a worker
// that starts late (or a core that is busy with another process) simply
// takes fewer pieces instead of delaying the whole call.
type batch struct {
	r    runner
	n, p int
	next atomic.Int64
	wg   sync.WaitGroup
}

func (b *batch) work() {
	for {
		c := int(b.next.Add(1) - 1)
		if c >= b.p {
			return
		}
		b.r.run(c, c*b.n/b.p, (c+1)*b.n/b.p)
	}
}

var (
	poolOnce  sync.Once
	nWorkers  int
	batchCh   chan *batch
	batchPool = sync.Pool{New: func() any { return new(batch) }}
)

// startWorkers starts NumCPU-1 persistent worker goroutines; the calling
// goroutine always works on its own calls too.
func startWorkers() {
	batchCh = make(chan *batch) // unbuffered: a send succeeds only if a worker is idle
	nWorkers = runtime.NumCPU() - 1
	for i := 0; i < nWorkers; i++ {
		go func() {
			for b := range batchCh {
				b.work()
				b.wg.Done()
			}
		}()
	}
}

// Parallelism caps. LimitParallelism(n) and UnlimitParallelism(n) bracket
// a section of a program during which every kernel call splits its work
// over at most n cores. Sections may overlap (several data-parallel
// trainers in one process): the lowest cap among the open sections
// applies, and none once all are closed. parallelism holds that effective
// cap (0: none), capCount how many sections of each cap are open.
var (
	parallelism atomic.Int32
	capMu       sync.Mutex
	capCount    = map[int]int{}
)

// LimitParallelism opens a section in which kernels split their work over
// at most n ≥ 1 cores (n < 1 counts as 1) until the matching
// UnlimitParallelism(n). Callers that already keep every core busy with
// independent work (data-parallel training replicas, one per core) use 1,
// so that each kernel runs inline on its caller instead of handing pieces
// to workers that are busy anyway. Results do not depend on the cap beyond
// floating-point summation order.
func LimitParallelism(n int) {
	n = max(n, 1)
	capMu.Lock()
	capCount[n]++
	updateParallelism()
	capMu.Unlock()
}

// UnlimitParallelism closes a section opened by LimitParallelism(n).
func UnlimitParallelism(n int) {
	n = max(n, 1)
	capMu.Lock()
	defer capMu.Unlock()
	if capCount[n] == 0 {
		panic("kernels: UnlimitParallelism without a matching LimitParallelism")
	}
	capCount[n]-- // entries stay, so the next section allocates nothing
	updateParallelism()
}

// updateParallelism stores the lowest cap among the open sections (capMu
// held).
func updateParallelism() {
	c := 0
	for k, open := range capCount {
		if open > 0 && (c == 0 || k < c) {
			c = k
		}
	}
	parallelism.Store(int32(c))
}

// procs is the number of cores kernels split work over: GOMAXPROCS, or
// the LimitParallelism cap when that is lower.
func procs() int {
	p := runtime.GOMAXPROCS(0)
	if c := int(parallelism.Load()); c > 0 && c < p {
		return c
	}
	return p
}

// chunksPerProc is how many pieces per core the kernels cut their work into,
// for load balance when a core is shared with other processes.
const chunksPerProc = 4

// numChunks returns how many pieces parallelRun splits n items into when each
// piece should hold at least grain items.
func numChunks(n, grain int) int {
	p := procs()
	if p == 1 {
		return 1
	}
	return max(1, min(chunksPerProc*p, n/max(grain, 1)))
}

// parallelRun splits [0, n) into numChunks(n, grain) contiguous pieces and
// processes them on the calling goroutine and on whichever workers are idle.
// Nested calls never deadlock: a call that finds no idle worker does all the
// work itself.
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
	b := batchPool.Get().(*batch)
	b.r, b.n, b.p = r, n, p
	b.next.Store(0)
	want := min(nWorkers, p-1)
	for engaged := 0; ; {
		// Hand the batch to idle workers, retrying between pieces so that a
		// worker that was just finishing its previous batch still joins.
		for engaged < want {
			b.wg.Add(1)
			select {
			case batchCh <- b:
				engaged++
				continue
			default:
				b.wg.Done()
			}
			break
		}
		c := int(b.next.Add(1) - 1)
		if c >= p {
			break
		}
		r.run(c, c*n/p, (c+1)*n/p)
	}
	b.wg.Wait()
	b.r = nil
	batchPool.Put(b)
}

type funcRunner func(lo, hi int)

func (f funcRunner) run(_, lo, hi int) { f(lo, hi) }

// ParallelFor splits [0, n) into at most procs() (GOMAXPROCS or the
// LimitParallelism cap) contiguous ranges and calls body on each,
// concurrently on the calling goroutine and the package's persistent
// workers, returning when all are done. It runs body(0, n) inline when
// n < 2 or procs() is 1. Only the closure passed
// in may allocate; the scheduling itself allocates nothing. Calls may be
// nested (also around Sgemm): inner calls run inline when no worker is idle.
func ParallelFor(n int, body func(lo, hi int)) {
	p := procs()
	parallelRun(n, (n+p-1)/p, funcRunner(body))
}

// ParallelForGrain is ParallelFor with ranges of at least grain items (and
// up to 4·GOMAXPROCS of them), so that cheap bodies over small n run inline
// instead of paying for the hand-off (about a microsecond), and large ones
// balance their load over the cores.
func ParallelForGrain(n, grain int, body func(lo, hi int)) {
	parallelRun(n, grain, funcRunner(body))
}
