package train

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/network"
)

// TestLambdaTrainConfig: lambda_train is validated, may be added to a
// resumed run (a fine-tune, as bszt-brain's continuation), reaches the
// training streams' simulator options, and leaves the validation set —
// its samples and the λ-node weights of its loss — exactly as without it,
// so that the validation losses of runs with and without it compare.
func TestLambdaTrainConfig(t *testing.T) {
	f, _ := family.Lookup("lingauss-k6")
	cfg := tinyConfig(t, 2)
	cfg.Network.MaskDecoder = network.CategoricalDecoder
	cfg.Network.LambdaNodes = 4
	bad := cfg
	bad.LambdaTrain = &family.LambdaDist{Mix: 2, Power: 4}
	if err := bad.Validate(f); err == nil {
		t.Error("lambda_train with mix 2 accepted")
	}

	dir := filepath.Join(t.TempDir(), "plain")
	plain := newTrainer(t, cfg, dir)
	if d := plain.streams[0].sim.LambdaDist; !d.Uniform() {
		t.Fatalf("stream of a run without lambda_train draws λ from %+v", d)
	}
	runToEnd(t, plain)

	rho := family.LambdaDist{Mix: 0.75, Power: 4}
	rt, err := Resume(dir, filepath.Join(t.TempDir(), "fine"), func(c *Config) {
		c.Steps = 4
		c.LambdaTrain = &rho
	}, Options{})
	if err != nil {
		t.Fatalf("resume with lambda_train: %v", err)
	}
	defer rt.Close()
	if got := rt.streams[0].sim.LambdaDist; got != rho {
		t.Fatalf("training stream draws λ from %+v, want %+v", got, rho)
	}
	if len(rt.val) != len(plain.val) {
		t.Fatalf("%d validation streams, %d without lambda_train", len(rt.val), len(plain.val))
	}
	for j := range rt.val {
		for i, b := range rt.val[j].batches {
			p := &plain.val[j].batches[i]
			if !slices.Equal(b.RowWeight, p.RowWeight) || !slices.Equal(b.Class, p.Class) || !slices.Equal(b.PriorBias, p.PriorBias) {
				t.Fatalf("validation stream %d batch %d differs from the run without lambda_train", j, i)
			}
		}
	}
	if res := runToEnd(t, rt); res.Step != 4 {
		t.Errorf("fine-tune ended at step %d", res.Step)
	}
}

func TestParseLambdaTrain(t *testing.T) {
	d, err := ParseLambdaTrain("0.75:4")
	if err != nil || d == nil || *d != (family.LambdaDist{Mix: 0.75, Power: 4}) {
		t.Errorf("ParseLambdaTrain = %+v, %v", d, err)
	}
	if d, err := ParseLambdaTrain("uniform"); err != nil || d != nil {
		t.Errorf("ParseLambdaTrain(uniform) = %+v, %v", d, err)
	}
	for _, bad := range []string{"", "0.75", "0.75:4:1", "x:4", "0.75:x", "1.5:4", "0.5:0.5", "NaN:4"} {
		if _, err := ParseLambdaTrain(bad); err == nil {
			t.Errorf("ParseLambdaTrain(%q) accepted", bad)
		}
	}
}
