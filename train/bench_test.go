package train

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkTrain runs b.N steps of the loop with a shipped config
// (validation off, no checkpoints besides the first and the last) and
// reports the steady-state throughput (samples/s after the first step),
// samples per CPU-second (all threads) and the share of wall time the
// optimiser waited for data:
//
//	go test ./train -run '^$' -bench Train -benchtime 20x
func BenchmarkTrain(b *testing.B) {
	for _, name := range []string{"lingauss-k6", "symbolic-k15", "b3s"} {
		b.Run(name, func(b *testing.B) {
			cfg, err := LoadConfig(filepath.Join("..", "configs", name+".yaml"), "")
			if err != nil {
				b.Fatal(err)
			}
			cfg.Steps, cfg.Minutes = b.N+1, 0
			cfg.Validation.Every = 0
			cfg.CheckpointMinutes = 1e6
			tr, err := New(cfg, filepath.Join(b.TempDir(), "run"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			b.ResetTimer()
			res, err := tr.Run(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(res.SamplesPerSec, "samples/s")
			b.ReportMetric(res.SamplesPerCPUSec, "samples/CPU-s")
			b.ReportMetric(100*res.WaitShare, "%wait")
		})
	}
}
