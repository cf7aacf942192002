package train

import (
	"fmt"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/internal/memlimit"
	"github.com/prismsbi/prism/network"
)

// probeRows is the batch size of the memory probe.
const probeRows = 4

// MemoryPerSample measures the training graph's memory per sample: the
// arena of one forward and backward pass on a probe batch of probeRows
// samples simulated with the run's first design stream, divided by
// probeRows (the arena grows linearly with the batch: every activation
// has one row block per sample). The trainer's state is untouched; the
// probe's gradients are cleared.
func (t *Trainer) MemoryPerSample() (float64, error) {
	samples := make([]family.Sample, probeRows)
	family.SimulateBatch(t.f, t.streams[0].sim, 0, samples)
	var b network.Batch
	if err := t.net.MakeBatch(samples, t.streams[0].noiseSeed, &b); err != nil {
		return 0, fmt.Errorf("train: memory probe: %w", err)
	}
	g := engine.NewGraph()
	total, _, _ := t.net.Loss(g, &b)
	g.BackwardFrom(total, []float32{1})
	t.params.ZeroGrad()
	return float64(g.ArenaBytes()) / probeRows, nil
}

// checkMemory refuses a batch_size whose training graph would not fit in
// the available memory (internal/memlimit), naming the largest that
// would. Per unit of batch_size: the probe's bytes per sample times the
// number of design streams (each contributes batch_size samples per
// step), plus 25 %: on the 2-core test machine the peak resident memory
// grew by 320 kB per unit for lingauss-k6 (probe: 321 kB, one stream) and
// 13.5 MB for b3s (probe: 3.9 MB × 3 streams = 11.7 MB), measured with
// /usr/bin/time between batch sizes 128 and 1024 (lingauss) and 32 and
// 256 (b3s). The fixed part is the parameters with their gradients, Adam
// moments and EMA plus one gradient copy per replica.
func (t *Trainer) checkMemory() error {
	probe, err := t.MemoryPerSample()
	if err != nil {
		return err
	}
	per := 1.25 * probe * float64(len(t.streams))
	fixed := 4 * float64(t.params.NumValues()) * float64(4+len(t.reps))
	if err := memlimit.Check("batch_size", int64(t.cfg.BatchSize), fixed, per, memlimit.Available()); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return nil
}
