package train

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prismsbi/prism/checkpoint"
)

// TestInitFrom checks the warm start: a run with InitFrom begins (step 0,
// both raw and EMA weights) exactly at the source run's EMA weights, trains
// on from there, and a source with another network configuration is
// refused.
func TestInitFrom(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	cfg := tinyConfig(t, 12)
	runToEnd(t, newTrainer(t, cfg, src))
	want, _, _, err := loadNetwork(src, true)
	if err != nil {
		t.Fatal(err)
	}

	warm := cfg
	warm.Seed = 99 // the weights must come from src, not from this seed
	warm.Steps = 3
	warm.InitFrom = src
	dst := filepath.Join(t.TempDir(), "dst")
	tr := newTrainer(t, warm, dst)
	for _, ema := range []bool{false, true} {
		got, _, st, err := loadNetwork(dst, ema)
		if err != nil {
			t.Fatal(err)
		}
		if st.Step != 0 {
			t.Fatalf("warm start checkpoint at step %d, want 0", st.Step)
		}
		a, b := want.Params().All(), got.Params().All()
		for i := range a {
			for j := range a[i].Data {
				if a[i].Data[j] != b[i].Data[j] {
					t.Fatalf("ema=%v: %s[%d] = %v, want the source's EMA value %v", ema, a[i].Name, j, b[i].Data[j], a[i].Data[j])
				}
			}
		}
	}
	runToEnd(t, tr)
	got, cfgOut, _, err := loadNetwork(dst, false)
	if err != nil {
		t.Fatal(err)
	}
	if cfgOut.InitFrom != src {
		t.Errorf("checkpoint config init_from = %q, want %q", cfgOut.InitFrom, src)
	}
	moved := false
	for i, p := range got.Params().All() {
		for j := range p.Data {
			moved = moved || p.Data[j] != want.Params().All()[i].Data[j]
		}
	}
	if !moved {
		t.Error("three training steps after the warm start left every weight unchanged")
	}

	other := warm
	other.Network.ModelDim *= 2
	_, err = New(other, filepath.Join(t.TempDir(), "bad"), Options{})
	if err == nil || !strings.Contains(err.Error(), "network configuration") {
		t.Errorf("warm start from a different architecture: err = %v, want a network configuration mismatch", err)
	}
	missing := warm
	missing.InitFrom = filepath.Join(t.TempDir(), "nothing")
	bad := filepath.Join(t.TempDir(), "bad2")
	if _, err := New(missing, bad, Options{}); err == nil {
		t.Error("warm start from a missing directory succeeded")
	} else if _, serr := os.Stat(bad); serr == nil {
		t.Errorf("failed warm start left its output directory %s behind", bad)
	}
}

// TestInitFromWeightsFile checks the warm start from a weights file (a
// checkpoint's ema.safetensors, the format `prism export` writes): the run
// starts exactly at those weights, and a file of another kind (the
// checkpoint's own checkpoint.safetensors) is refused by its prism.kind.
func TestInitFromWeightsFile(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	cfg := tinyConfig(t, 12)
	runToEnd(t, newTrainer(t, cfg, src))
	want, _, _, err := loadNetwork(src, true)
	if err != nil {
		t.Fatal(err)
	}
	name, err := checkpoint.Latest(src)
	if err != nil {
		t.Fatal(err)
	}
	warm := cfg
	warm.Seed = 99
	warm.Steps = 3
	warm.InitFrom = filepath.Join(src, name, checkpoint.EMAFile)
	dst := filepath.Join(t.TempDir(), "dst")
	newTrainer(t, warm, dst)
	got, _, _, err := loadNetwork(dst, false)
	if err != nil {
		t.Fatal(err)
	}
	a, b := want.Params().All(), got.Params().All()
	for i := range a {
		for j := range a[i].Data {
			if a[i].Data[j] != b[i].Data[j] {
				t.Fatalf("%s[%d] = %v, want the weights file's %v", a[i].Name, j, b[i].Data[j], a[i].Data[j])
			}
		}
	}
	wrong := warm
	wrong.InitFrom = filepath.Join(src, name, checkpoint.CheckpointFile)
	if _, err := New(wrong, filepath.Join(t.TempDir(), "bad"), Options{}); err == nil || !strings.Contains(err.Error(), "prism.kind") {
		t.Errorf("warm start from a checkpoint.safetensors: err = %v, want a prism.kind error", err)
	}
}
