package benchcpu

import "testing"

// TestLoopRunsOp checks the call count of Loop (one warm-up plus b.N) and
// that it reports a CPU figure where the platform has one.
func TestLoopRunsOp(t *testing.T) {
	calls := 0
	res := testing.Benchmark(func(b *testing.B) {
		calls = 0
		Loop(b, func() {
			calls++
			s := 0.0
			for i := range 200000 {
				s += float64(i)
			}
			_ = s
		})
		if calls != b.N+1 {
			t.Errorf("op ran %d times for b.N = %d, want %d", calls, b.N, b.N+1)
		}
	})
	if res.N == 0 {
		t.Fatal("benchmark did not run")
	}
	if _, ok := res.Extra["cpu-s/op"]; !ok && Start() != 0 {
		t.Error("no cpu-s/op metric although the platform reports CPU time")
	}
}
