package cputime

import (
	"runtime"
	"testing"
)

// TestGrowsWithWork burns CPU and checks that the reading advances by at
// least part of it (the clock's granularity is ~1–10 ms, far below the
// ~50 ms of work here).
func TestGrowsWithWork(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" {
		t.Skip("no getrusage")
	}
	s0, ok := Seconds()
	if !ok {
		t.Fatal("CPU time unreadable on a unix system")
	}
	d0 := Duration()
	x := 0.0
	for i := 0; i < 50_000_000; i++ {
		x += float64(i % 7)
	}
	if x == 0 {
		t.Fatal("unreachable")
	}
	s1, _ := Seconds()
	if s1-s0 < 0.005 {
		t.Errorf("CPU time advanced by %.4f s after a busy loop", s1-s0)
	}
	if Duration() <= d0 {
		t.Error("Duration did not advance")
	}
}
