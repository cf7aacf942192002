package train

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/prismsbi/prism/family"
)

// firstGradient builds a trainer for cfg, takes the first step's data and
// returns the step's loss and a copy of every parameter gradient.
func firstGradient(t *testing.T, cfg Config, skip int) (float64, [][]float32) {
	t.Helper()
	tr := newTrainer(t, cfg, filepath.Join(t.TempDir(), "run"))
	defer tr.Close()
	starts := make([]uint64, len(tr.streams))
	for j := range starts {
		starts[j] = uint64(skip * cfg.BatchSize)
	}
	pf := newPrefetcher(tr.f, tr.net, tr.streams, cfg.BatchSize, len(tr.reps), starts, 1, 1)
	defer pf.close()
	grp, err := pf.nextGroup(context.Background())
	if err != nil || grp.err != nil {
		t.Fatal(err, grp.err)
	}
	loss, _, _, finite := tr.gradients(grp)
	if !finite {
		t.Fatal("non-finite loss")
	}
	var grads [][]float32
	for _, p := range tr.params.All() {
		grads = append(grads, append([]float32(nil), p.Grad...))
	}
	return loss, grads
}

// gradDiff returns the largest difference between two gradients relative
// to the largest gradient entry of the same tensor, over all tensors.
func gradDiff(a, b [][]float32) float64 {
	worst := 0.0
	for i := range a {
		scale, diff := 0.0, 0.0
		for k := range a[i] {
			scale = max(scale, math.Abs(float64(a[i][k])))
			diff = max(diff, math.Abs(float64(a[i][k]-b[i][k])))
		}
		if scale > 0 {
			worst = max(worst, diff/scale)
		}
	}
	return worst
}

// TestReplicasGiveTheSameStep checks data-parallel training against one
// replica: the step's loss and gradient must be the same up to float32
// summation order. Shards that do not divide the batch evenly (16 rows in
// 5/5/6) and several design streams (b3s, two streams of 4 in 2/2) are
// included, so a wrong shard weight b/(B·S) would show as a gradient off by
// a few percent. The tolerance, 1e-4 of each tensor's largest entry, is
// ~100× the rounding of regrouping float32 sums of this size (measured
// ≈ 1e-6) and far below the difference between the gradients of two
// different batches (≈ 1, checked to exceed 1e-2 so that the comparison
// cannot pass by accident).
func TestReplicasGiveTheSameStep(t *testing.T) {
	b3s := func() Config {
		f, err := family.Lookup("b3s")
		if err != nil {
			t.Fatal(err)
		}
		c := DefaultConfig(f)
		c.Seed, c.BatchSize, c.Steps = 5, 4, 1
		c.Designs = []string{"ukb-mix", "hcp-mix"}
		c.Validation = ValidationConfig{}
		n := &c.Network
		n.ModelDim, n.Heads, n.HeadDim, n.MLPWidth = 16, 2, 8, 2
		n.EncoderLayers, n.MaskLayers, n.ParamLayers = 1, 1, 1
		n.LambdaEmbed, n.NoiseEmbed, n.Diffusion.BEmbed = 8, 8, 6
		return c
	}
	cases := []struct {
		name     string
		cfg      Config
		replicas int
	}{
		{"lingauss 16 rows in 3 shards", tinyConfig(t, 1), 3},
		{"b3s 2 streams in 2 shards", b3s(), 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			one := c.cfg
			one.Validation = ValidationConfig{}
			loss1, g1 := firstGradient(t, one, 0)
			many := one
			many.Replicas = c.replicas
			lossR, gR := firstGradient(t, many, 0)
			if d := math.Abs(loss1 - lossR); d > 1e-5*math.Abs(loss1) {
				t.Errorf("loss %.7g with one replica, %.7g with %d", loss1, lossR, c.replicas)
			}
			t.Logf("loss %.7g / %.7g; gradient difference %.2g", loss1, lossR, gradDiff(g1, gR))
			if d := gradDiff(g1, gR); d > 1e-4 {
				t.Errorf("gradients differ by %.3g of their scale with %d replicas", d, c.replicas)
			}
			_, other := firstGradient(t, one, 1)
			t.Logf("another batch: %.2g", gradDiff(g1, other))
			if d := gradDiff(g1, other); d < 1e-2 {
				t.Errorf("the gradients of two different batches differ by only %.3g", d)
			}
		})
	}
}

// TestReplicasDeterministic: a data-parallel run is reproducible bit for
// bit: the replicas' gradients are summed in a fixed order whatever the
// thread timing.
func TestReplicasDeterministic(t *testing.T) {
	cfg := tinyConfig(t, 10)
	cfg.Replicas = 2
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	runToEnd(t, newTrainer(t, cfg, a))
	runToEnd(t, newTrainer(t, cfg, b))
	sameCheckpoint(t, a, b)
}
