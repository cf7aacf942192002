package train

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBatchSizeMemory: the probe's memory per sample is positive and
// proportional to nothing but the network (two probes agree exactly), and
// a batch_size far beyond the machine's memory is refused before the run
// folder is created, with the largest batch size that fits.
func TestBatchSizeMemory(t *testing.T) {
	cfg := tinyConfig(t, 2)
	dir := filepath.Join(t.TempDir(), "run")
	tr := newTrainer(t, cfg, dir)
	a, err := tr.MemoryPerSample()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := tr.MemoryPerSample()
	if !(a > 0) || a != b {
		t.Fatalf("memory per sample %v, then %v", a, b)
	}
	t.Logf("tiny lingauss network: %.0f bytes per training sample", a)
	tr.Close()
	cfg.BatchSize = 1 << 40
	big := filepath.Join(t.TempDir(), "big")
	_, err = New(cfg, big, Options{})
	if err == nil || !strings.Contains(err.Error(), "batch_size 1099511627776 needs about") || !strings.Contains(err.Error(), "the largest value that fits is about") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(big); !os.IsNotExist(err) {
		t.Errorf("the refused run left %s", big)
	}
}
