package train

import (
	"path/filepath"
	"testing"

	"github.com/prismsbi/prism/family/spec"
)

// TestLingaussSpecShortTraining is TestLingaussShortTraining on the family
// spec re-creating lingauss-k6 (examples/lingauss-k6/family.yaml): the same
// configuration trained on the spec family must pass the same
// exact-posterior check (mean TV to lingauss-k6's exact model posterior
// within lingaussCIBound; reason for the bound there). The spec's
// simulations are bit-identical to the built-in family's (family/spec
// test), so the run sees the same data. The spec travels inside the
// checkpoint: LoadNetwork re-creates the family from it.
func TestLingaussSpecShortTraining(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for ~15 s")
	}
	f, err := spec.Load("../examples/lingauss-k6/family.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig("../configs/lingauss-k6.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	text, dir, _ := spec.Source(f)
	cfg.Family, cfg.Spec, cfg.SpecDir = f.Name(), string(text), dir
	cfg.Steps, cfg.Minutes = lingaussCISteps, 0
	cfg.Validation.Every = 0
	cfg.Optimizer.EMADecay = 0.99 // as in TestLingaussShortTraining
	run := filepath.Join(t.TempDir(), "run")
	tr := newTrainer(t, cfg, run)
	runToEnd(t, tr)
	net, got, _, err := loadNetwork(run, true)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec != string(text) || net.Family().Name() != "lingauss-spec" {
		t.Fatalf("checkpoint family %s, spec stored %v", net.Family().Name(), got.Spec != "")
	}
	acc, err := LingaussMaskAccuracy(net, 100, LingaussEvalSeed)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("spec family after %d steps: mean TV %.4f (worst %.4f), mean KL %.4f, bound %.2f", cfg.Steps, acc.MeanTV, acc.WorstTV, acc.MeanKL, lingaussCIBound)
	if acc.MeanTV > lingaussCIBound {
		t.Errorf("mean TV %.4f exceeds %.2f", acc.MeanTV, lingaussCIBound)
	}
}
