// Package benchcpu adds process CPU time to Go benchmarks. prism's
// benchmarks run on a 2-core machine shared with other jobs, where wall
// time depends on the load and CPU seconds per operation are the figure
// that compares across runs (docs/benchmarks.md).
package benchcpu

import (
	"testing"

	"github.com/prismsbi/prism/internal/cputime"
)

// Start returns the process CPU time in seconds (0 where the platform does
// not report it), the starting point for Report.
func Start() float64 {
	s, _ := cputime.Seconds()
	return s
}

// Report adds the metric cpu-s/op: the process CPU seconds since start
// (from Start, taken after b.ResetTimer's warm-up) per b.N operations. It
// reports nothing where the platform gives no CPU time.
func Report(b *testing.B, start float64) {
	if cpu, ok := cputime.Seconds(); ok {
		b.ReportMetric((cpu-start)/float64(b.N), "cpu-s/op")
	}
}

// Loop runs op once as a warm-up (arenas, caches), then b.N times with the
// timer reset, and reports cpu-s/op.
func Loop(b *testing.B, op func()) {
	op()
	start := Start()
	b.ResetTimer()
	for range b.N {
		op()
	}
	Report(b, start)
}
