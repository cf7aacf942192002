package train

import (
	"math"
	"runtime"
	"sync"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/engine/kernels"
	"github.com/prismsbi/prism/network"
)

// replica is one data-parallel copy of the network with its own graph
// (Config.Replicas). Its parameters share values with the trainer's
// network and hold their own gradients.
type replica struct {
	net *network.Net
	g   *engine.Graph

	// Results of the last pass: the loss terms weighted by this replica's
	// share of the step, and whether every loss was finite.
	loss, ml, pl float64
	finite       bool

	seed [1]float32 // the backward pass's seed gradient (the shard's weight)
}

// replicas returns the number of data-parallel replicas (at least one).
func (c *Config) replicas() int { return max(c.Replicas, 1) }

// pass runs the forward and backward passes of replica r on its shard of
// every stream's batch in grp (grp.batches[j·R + r]). With S streams of B
// samples, a shard of b rows is weighted b/(B·S): the network's losses are
// means over the shard, so the weighted sum over shards and streams is the
// mean loss of the step, and the gradients summed over replicas are its
// gradient.
func (r *replica) pass(grp *group, rep, nrep, nstreams, bs int) {
	r.loss, r.ml, r.pl, r.finite = 0, 0, 0, true
	r.net.Params().ZeroGrad()
	for j := range nstreams {
		b := &grp.batches[j*nrep+rep]
		w := float64(b.B) / float64(bs*nstreams)
		r.g.Reset()
		total, m, p := r.net.Loss(r.g, b)
		v := float64(total.Item())
		if math.IsNaN(v) || math.IsInf(v, 0) {
			r.finite = false
			return
		}
		r.seed[0] = float32(w)
		r.g.BackwardFrom(total, r.seed[:])
		r.loss += w * v
		r.ml += w * m
		r.pl += w * p
	}
}

// gradients runs every replica's passes on grp, concurrently when there is
// more than one, leaves the step's gradient in the trainer's parameters
// and returns the step's mean loss and its two terms, and whether all were
// finite.
func (t *Trainer) gradients(grp *group) (loss, ml, pl float64, finite bool) {
	nrep, nstreams := len(t.reps), len(t.streams)
	if nrep == 1 {
		r := &t.reps[0]
		r.pass(grp, 0, 1, nstreams, t.cfg.BatchSize)
		return r.loss, r.ml, r.pl, r.finite
	}
	// The replicas already occupy the cores: kernels split their work over
	// the cores left to each replica (usually none, so they run inline).
	limit := max(1, runtime.GOMAXPROCS(0)/nrep)
	kernels.LimitParallelism(limit)
	var wg sync.WaitGroup
	for i := range t.reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.reps[i].pass(grp, i, nrep, nstreams, t.cfg.BatchSize)
		}()
	}
	wg.Wait()
	kernels.UnlimitParallelism(limit)

	finite = true
	for i := range t.reps {
		r := &t.reps[i]
		loss, ml, pl = loss+r.loss, ml+r.ml, pl+r.pl
		finite = finite && r.finite
	}
	if !finite {
		return loss, ml, pl, false
	}
	// Sum the replicas' gradients into replica 0's (the trainer's), in
	// replica order so that the result does not depend on timing.
	main := t.params.All()
	for i := 1; i < nrep; i++ {
		for k, p := range t.reps[i].net.Params().All() {
			kernels.Axpy(1, p.Grad, main[k].Grad)
		}
	}
	return loss, ml, pl, true
}
