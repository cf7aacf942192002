package train

import (
	"flag"
	"testing"
)

var lingaussCheckpoint = flag.String("lingauss-checkpoint", "",
	"lingauss-k6 training directory for TestLingaussCheckpointTV (e.g. after `prism train --config configs/lingauss-k6.yaml --minutes 5 --out DIR`)")

// TestLingaussCheckpointTV is the accuracy check, run by hand on
// the checkpoint of a 5-minute training run (docs/training.md): the EMA
// network's q(M | x, λ) on 100 held-out observations must be within mean
// total variation 0.10 of the exact model posterior.
func TestLingaussCheckpointTV(t *testing.T) {
	if *lingaussCheckpoint == "" {
		t.Skip("set -lingauss-checkpoint DIR to evaluate a training run")
	}
	net, cfg, st, err := LoadNetwork(*lingaussCheckpoint, true)
	if err != nil {
		t.Fatal(err)
	}
	mean, worst, err := LingaussMaskTV(net, 100, LingaussEvalSeed)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s after %d steps of batch %d: mean TV %.4f (worst %.4f); the prior's mean TV is %.4f",
		cfg.Family, st.Step, cfg.BatchSize, mean, worst, LingaussPriorTV(100, LingaussEvalSeed))
	if mean > 0.10 {
		t.Errorf("mean TV %.4f exceeds 0.10", mean)
	}
}
