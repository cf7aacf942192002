package train

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/network"
)

// valStream is the fixed validation set of one design stream, simulated
// once from its own seed stream and cut into batches of at most
// BatchSize.
type valStream struct {
	batches []network.Batch
	sizes   []int
}

func buildValidation(f family.Family, net *network.Net, cfg *Config, streams []stream) ([]valStream, error) {
	out := make([]valStream, len(streams))
	for j, s := range streams {
		opt := s.sim
		opt.Seed = deriveSeed(cfg.Seed, tagValSim+uint64(j))
		opt.Proposal = nil                   // validation measures the loss under the prior itself,
		opt.LambdaDist = family.LambdaDist{} // λ ~ U(0, 1) included
		noise := deriveSeed(cfg.Seed, tagValNoise+uint64(j))
		for lo := 0; lo < cfg.Validation.Size; lo += cfg.BatchSize {
			n := min(cfg.BatchSize, cfg.Validation.Size-lo)
			samples := make([]family.Sample, n) // fresh: a Batch may keep references
			if _, err := family.TrySimulateBatch(f, opt, uint64(lo), samples[:n]); err != nil {
				return nil, fmt.Errorf("train: validation set, stream %q: %w", s.name, err)
			}
			if err := checkFinite(samples[:n]); err != nil {
				return nil, fmt.Errorf("train: validation set, stream %q: %w", s.name, err)
			}
			var b network.Batch
			if err := net.MakeBatch(samples[:n], noise, &b); err != nil {
				return nil, fmt.Errorf("train: validation set, stream %q: %w", s.name, err)
			}
			out[j].batches = append(out[j].batches, b)
			out[j].sizes = append(out[j].sizes, n)
		}
	}
	return out, nil
}

// validate evaluates the validation set with the EMA weights (the weights
// a finished run is used with) and restores the raw weights afterwards.
func (t *Trainer) validate() ValRecord {
	off := 0
	for _, p := range t.params.All() {
		copy(t.backup[off:], p.Data)
		off += len(p.Data)
	}
	ema := t.opt.EMA()
	for i, p := range t.params.All() {
		copy(p.Data, ema[i].Data)
	}
	rec := t.evaluate()
	off = 0
	for _, p := range t.params.All() {
		copy(p.Data, t.backup[off:off+len(p.Data)])
		off += len(p.Data)
	}
	return rec
}

// evaluate returns the validation losses of the network's current
// weights, averaged over the samples of a stream and then over streams
// like the training loss. Non-finite values are stored as ±MaxFloat64
// (JSON has no NaN or Inf).
func (t *Trainer) evaluate() ValRecord {
	rec := ValRecord{Step: t.state.Step}
	for _, vs := range t.val {
		var loss, ml, pl float64
		n := 0
		for i := range vs.batches {
			t.vg.Reset()
			total, m, p := t.net.Loss(t.vg, &vs.batches[i])
			w := float64(vs.sizes[i])
			loss += w * float64(total.Item())
			ml += w * m
			pl += w * p
			n += vs.sizes[i]
		}
		k := float64(len(t.val)) * float64(n)
		rec.Loss += loss / k
		rec.MaskLoss += ml / k
		rec.ParamLoss += pl / k
	}
	t.vg.Reset()
	rec.Loss, rec.MaskLoss, rec.ParamLoss = sanitize(rec.Loss), sanitize(rec.MaskLoss), sanitize(rec.ParamLoss)
	return rec
}

// sanitize maps non-finite values to ±MaxFloat64 so they can be stored as
// JSON.
func sanitize(v float64) float64 {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 1):
		return math.MaxFloat64
	case math.IsInf(v, -1):
		return -math.MaxFloat64
	}
	return v
}
