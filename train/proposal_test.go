package train

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
)

// TestProposalConfig: a fraction proposal is refused for a family without
// fractions, trains b3s with weighted batches while the validation set
// stays unweighted (it measures the prior's loss), and may be added to a
// resumed run.
func TestProposalConfig(t *testing.T) {
	lg := tinyConfig(t, 2)
	lg.Proposal = &family.FractionProposal{Scale: 2.5, Mix: 0.5}
	f, _ := family.Lookup("lingauss-k6")
	if err := lg.Validate(f); err == nil || !strings.Contains(err.Error(), "no mixing fractions") {
		t.Errorf("lingauss-k6 with a proposal: %v", err)
	}

	b3s, _ := family.Lookup("b3s")
	cfg := DefaultConfig(b3s)
	cfg.Seed, cfg.BatchSize, cfg.Steps = 3, 8, 2
	cfg.Designs = []string{"ukb"}
	cfg.CheckpointEvery, cfg.LogEvery = 2, 1
	cfg.Validation = ValidationConfig{Size: 8, Every: 2}
	n := &cfg.Network
	n.ModelDim, n.Heads, n.HeadDim, n.MLPWidth = 16, 2, 8, 2
	n.EncoderLayers, n.MaskLayers, n.ParamLayers = 1, 1, 1
	n.LambdaEmbed, n.NoiseEmbed = 8, 8
	dir := filepath.Join(t.TempDir(), "plain")
	runToEnd(t, newTrainer(t, cfg, dir))

	rt, err := Resume(dir, filepath.Join(t.TempDir(), "fine"), func(c *Config) {
		c.Steps = 4
		c.Proposal = &family.FractionProposal{Scale: 2.5, Mix: 0.5}
	}, Options{})
	if err != nil {
		t.Fatalf("resume with a proposal: %v", err)
	}
	defer rt.Close()
	for _, v := range rt.val {
		for _, b := range v.batches {
			if b.Weighted {
				t.Fatal("validation batch drawn from the proposal")
			}
		}
	}
	if rt.streams[0].sim.Proposal == nil {
		t.Fatal("training stream without the proposal")
	}
	if res := runToEnd(t, rt); res.Step != 4 {
		t.Errorf("fine-tune ended at step %d", res.Step)
	}
}

func TestParseProposal(t *testing.T) {
	p, err := ParseProposal("2.5:0.5")
	if err != nil || *p != (family.FractionProposal{Scale: 2.5, Mix: 0.5}) {
		t.Errorf("ParseProposal = %+v, %v", p, err)
	}
	for _, bad := range []string{"", "2.5", "2.5:0.5:1", "2.5:0.5x", "x:0.5", "1:0.5", "2:1", "2:0", "NaN:0.5"} {
		if _, err := ParseProposal(bad); err == nil {
			t.Errorf("ParseProposal(%q) accepted", bad)
		}
	}
}
