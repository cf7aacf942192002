package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// clock is a settable time for the bar.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// TestLogLines: on a log, one line per completed 10 % (not per update),
// the last one at 100 %; the rate and ETA count only this run's items
// (resumed 20 of 100, then 40 more in 10 s: 4 items/s, 40 left: 10 s).
func TestLogLines(t *testing.T) {
	var buf bytes.Buffer
	t0 := time.Unix(1000, 0)
	c := &clock{t0}
	b := New(&buf, false, "fit", "voxels", 100, 20, t0)
	b.now = c.now
	for done := 21; done <= 60; done++ {
		c.t = t0.Add(time.Duration(done-20) * 250 * time.Millisecond)
		b.Update(done)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	// Deciles 2 (first update, at 21), 3, 4, 5 and 6.
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5:\n%s", len(lines), buf.String())
	}
	last := lines[len(lines)-1]
	want := "fit: [##################............]  60% 60/100 voxels, 4.0 voxels/s, elapsed 10s, ETA 10s"
	if last != want {
		t.Errorf("last line\n%q, want\n%q", last, want)
	}
	b.Finish()
	if strings.HasSuffix(buf.String(), "\n\n") {
		t.Error("Finish wrote an empty line on a log")
	}
}

// TestLogEvery30s: without a new decile, a line after 30 s of silence.
func TestLogEvery30s(t *testing.T) {
	var buf bytes.Buffer
	t0 := time.Unix(1000, 0)
	c := &clock{t0}
	b := New(&buf, false, "fit", "voxels", 1000, 0, t0)
	b.now = c.now
	c.t = t0.Add(time.Second)
	b.Update(1) // decile 0: a line
	c.t = t0.Add(20 * time.Second)
	b.Update(2) // same decile, 19 s later: none
	c.t = t0.Add(32 * time.Second)
	b.Update(3) // 31 s after the last line: one
	if n := strings.Count(buf.String(), "\n"); n != 2 {
		t.Errorf("%d lines, want 2:\n%s", n, buf.String())
	}
}

// TestTerminal: on a terminal every update redraws the line in place and
// Finish ends it.
func TestTerminal(t *testing.T) {
	var buf bytes.Buffer
	t0 := time.Unix(1000, 0)
	b := New(&buf, true, "fit", "voxels", 4, 0, t0)
	b.now = func() time.Time { return t0.Add(2 * time.Second) }
	b.Update(1)
	b.Update(2)
	b.Finish()
	out := buf.String()
	if strings.Count(out, "\r") != 2 || strings.Count(out, "\x1b[K") != 2 || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("terminal output %q", out)
	}
	if !strings.Contains(out, " 50% 2/4 voxels, 1.0 voxels/s, elapsed 2s, ETA 2s") {
		t.Errorf("terminal output %q lacks the 50%% state", out)
	}
}

// TestBeginNil: a nil Start reports nothing; Func passes done and total.
func TestBeginNil(t *testing.T) {
	r := Begin(nil, "x", 10, 0)
	r.Update(3)
	r.Finish()
	var got [2]int
	r = Begin(Func(func(done, total int) { got = [2]int{done, total} }), "x", 10, 0)
	r.Update(3)
	if got != [2]int{3, 10} {
		t.Errorf("Func got %v, want [3 10]", got)
	}
	var buf bytes.Buffer
	if IsTerminal(&buf) {
		t.Error("a buffer is not a terminal")
	}
}
