package train

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkTrain runs b.N steps of the loop with a shipped config
// (validation off, no checkpoints besides the first and the last) and
// reports the steady-state throughput (samples/s after the first step),
// samples per CPU-second (all threads) and the share of wall time the
// optimiser waited for data:
//
//	go test ./train -run '^$' -bench Train -benchtime 20x
//
// The /replicas=2 cases run the same config data-parallel on two
// replicas (Config.Replicas), side by side with one.
func BenchmarkTrain(b *testing.B) {
	for _, name := range []string{"lingauss-k6", "lingauss-k6/replicas=2", "symbolic-k15", "symbolic-k15/replicas=2", "b3s", "b3s/replicas=2"} {
		b.Run(name, func(b *testing.B) {
			file, replicas := name, 1
			if base, ok := strings.CutSuffix(name, "/replicas=2"); ok {
				file, replicas = base, 2
			}
			cfg, err := LoadConfig(filepath.Join("..", "configs", file+".yaml"), "")
			if err != nil {
				b.Fatal(err)
			}
			cfg.Replicas = replicas
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
