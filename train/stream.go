package train

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/internal/seeds"
	"github.com/prismsbi/prism/network"
)

// Seeds of the independent random streams of a run, all derived from
// Config.Seed by mixing in a fixed tag, so that changing one stream (say,
// the validation set size) cannot change another.
const (
	tagInit     = 1   // initial weights
	tagTrainSim = 100 // + stream: training simulations
	tagTrainNoi = 200 // + stream: the network's training noise (MakeBatch)
	tagValSim   = 300 // + stream: validation simulations
	tagValNoise = 400 // + stream: validation noise
)

// deriveSeed returns the seed of stream tag of a run with the given seed.
func deriveSeed(seed, tag uint64) uint64 { return seeds.Derive(seed, tag) }

// stream is one design stream: where its simulations come from.
type stream struct {
	name      string // design spec (family.Designs argument)
	sim       family.SimOptions
	noiseSeed uint64 // MakeBatch seed
}

// group is the data of one optimiser step: one batch per stream, cut into
// one shard per data-parallel replica.
type group struct {
	starts  []uint64          // global index of each stream's first sample
	samples [][]family.Sample // per stream, BatchSize samples
	// batches holds the network's tensors of stream j's shard r at
	// j·replicas + r; shard r holds the stream's samples
	// [r·B/replicas, (r+1)·B/replicas).
	batches []network.Batch
	err     error
	dropped int // simulations dropped for non-finite observations (external simulators)
	owner   int // worker whose free list the group returns to
}

// prefetcher runs simulator goroutines that fill a bounded set of groups
// ahead of the optimiser. Group k (k = 0, 1, … counted from the
// prefetcher's start) holds, for stream j, the samples with global indices
// [start_j + k·B, start_j + (k+1)·B) and is produced by worker k mod W, so
// every worker fills its groups in order and the consumer reads group k
// from worker k mod W's queue: the data of a step are fixed by its index,
// whatever the thread timing. Each worker owns depth/W groups that cycle
// between its free list and its ready queue, so the buffer is bounded and
// no worker can starve another of buffers.
type prefetcher struct {
	f       family.Family
	net     *network.Net
	streams []stream
	bs      int
	shards  int // replicas: shards per stream batch
	starts  []uint64

	ready []chan *group
	free  []chan *group
	done  chan struct{}
	wg    sync.WaitGroup

	next   int           // index of the group the consumer reads next
	waited time.Duration // total time next spent blocked
}

// newPrefetcher starts workers simulating from the given per-stream start
// indices.
func newPrefetcher(f family.Family, net *network.Net, streams []stream, bs, shards int, starts []uint64, workers, depth int) *prefetcher {
	p := &prefetcher{
		f: f, net: net, streams: streams, bs: bs, shards: shards, starts: append([]uint64(nil), starts...),
		ready: make([]chan *group, workers), free: make([]chan *group, workers),
		done: make(chan struct{}),
	}
	per := max(1, depth/workers)
	for w := range workers {
		p.ready[w] = make(chan *group, per)
		p.free[w] = make(chan *group, per)
		for range per {
			p.free[w] <- &group{
				starts:  make([]uint64, len(streams)),
				samples: make([][]family.Sample, len(streams)),
				batches: make([]network.Batch, len(streams)*shards),
				owner:   w,
			}
		}
		p.wg.Add(1)
		go p.work(w, workers)
	}
	return p
}

func (p *prefetcher) work(w, workers int) {
	defer p.wg.Done()
	for k := w; ; k += workers {
		var g *group
		select {
		case g = <-p.free[w]:
		case <-p.done:
			return
		}
		p.fill(g, k)
		select {
		case p.ready[w] <- g:
		case <-p.done:
			return
		}
	}
}

// fill simulates group k. Samples are simulated one at a time on this
// goroutine (family.SimulateBatch with one sample runs inline), so that
// SimWorkers alone sets the simulation parallelism.
func (p *prefetcher) fill(g *group, k int) {
	g.err, g.dropped = nil, 0
	for j := range p.streams {
		s := &p.streams[j]
		start := p.starts[j] + uint64(k)*uint64(p.bs)
		g.starts[j] = start
		if cap(g.samples[j]) < p.bs {
			g.samples[j] = make([]family.Sample, p.bs)
		}
		samples := g.samples[j][:p.bs]
		if _, ok := p.f.(family.BatchSimulator); ok {
			// An external simulator gets the whole batch (its own worker
			// processes parallelise it) and may fail or drop samples.
			dropped, err := family.TrySimulateBatch(p.f, s.sim, start, samples)
			g.dropped += dropped
			if err != nil {
				g.err = fmt.Errorf("stream %q: %w", s.name, err)
				return
			}
		} else {
			for i := range samples {
				family.SimulateBatch(p.f, s.sim, start+uint64(i), samples[i:i+1])
			}
		}
		if err := checkFinite(samples); err != nil {
			g.err = fmt.Errorf("stream %q: %w", s.name, err)
			return
		}
		for r := range p.shards {
			lo, hi := r*p.bs/p.shards, (r+1)*p.bs/p.shards
			if err := p.net.MakeBatch(samples[lo:hi], s.noiseSeed, &g.batches[j*p.shards+r]); err != nil {
				g.err = fmt.Errorf("stream %q, samples %d–%d: %w", s.name, start+uint64(lo), start+uint64(hi)-1, err)
				return
			}
		}
	}
}

// checkFinite reports the first simulation with a non-finite value.
func checkFinite(samples []family.Sample) error {
	for i := range samples {
		for _, v := range samples[i].X {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("simulation %d (mask %s) has a non-finite value",
					samples[i].Index, family.MaskString(samples[i].Mask))
			}
		}
	}
	return nil
}

// nextGroup returns the next group in order, blocking until it is ready;
// the time spent blocked is added to waited.
func (p *prefetcher) nextGroup(ctx context.Context) (*group, error) {
	ch := p.ready[p.next%len(p.ready)]
	var g *group
	select {
	case g = <-ch:
	default:
		t0 := time.Now()
		select {
		case g = <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		p.waited += time.Since(t0)
	}
	p.next++
	return g, nil
}

// release hands a consumed group back to its worker.
func (p *prefetcher) release(g *group) { p.free[g.owner] <- g }

// close stops the workers and waits for them.
func (p *prefetcher) close() {
	close(p.done)
	p.wg.Wait()
}
