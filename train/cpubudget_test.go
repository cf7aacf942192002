package train

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/prismsbi/prism/family"
)

// TestCPUMinutesStopsRun: a run bounded only by cpu_minutes stops for
// that reason once the process CPU time of the run passes the budget
// (here 0.6 s; the tiny lingauss network takes ~ms per step, so the run
// ends after tens to hundreds of steps, long before the step limit), and
// its log lines carry the CPU time spent, never decreasing.
func TestCPUMinutesStopsRun(t *testing.T) {
	cfg := tinyConfig(t, 0)
	cfg.Steps, cfg.CPUMinutes = 0, 0.01
	dir := filepath.Join(t.TempDir(), "run")
	tr := newTrainer(t, cfg, dir)
	res := runToEnd(t, tr)
	if res.Stopped != "cpu_minutes" {
		t.Fatalf("stopped by %q after %d steps, want cpu_minutes", res.Stopped, res.StepsThisRun)
	}
	if res.CPUTime.Seconds() < 0.6 {
		t.Errorf("stopped after %v of CPU, budget 0.6 s", res.CPUTime)
	}
	logf, err := os.Open(filepath.Join(dir, "log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	last, lines := -1.0, 0
	for sc := bufio.NewScanner(logf); sc.Scan(); {
		var l struct {
			CPU *float64 `json:"cpu_s"`
			Val *float64 `json:"val_loss"`
			Ev  string   `json:"event"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Val != nil || l.Ev != "" {
			continue
		}
		if l.CPU == nil || *l.CPU < last {
			t.Fatalf("log line %s: cpu_s missing or decreasing (previous %v)", sc.Bytes(), last)
		}
		last = *l.CPU
		lines++
	}
	if lines == 0 {
		t.Error("no training log lines")
	}
	bad := tinyConfig(t, 10)
	bad.CPUMinutes = -1
	f, err := family.Lookup(bad.Family)
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Validate(f); err == nil {
		t.Error("cpu_minutes -1 accepted")
	}
}

// TestOverridesCPUMinutes: a CPU budget bounds one invocation. A resume
// that names a new length (--steps or --minutes) without --cpu-minutes
// drops the stored budget (a run first trained under --cpu-minutes 20
// and resumed with --steps 400000 used to stop after another 20 CPU
// minutes); one that names no length keeps it, and --cpu-minutes given
// with a length sets both.
func TestOverridesCPUMinutes(t *testing.T) {
	stored := Config{CPUMinutes: 20, Steps: 0}
	cases := []struct {
		o                   Overrides
		steps               int
		minutes, cpuMinutes float64
	}{
		{Overrides{Steps: 400000}, 400000, 0, 0},
		{Overrides{Minutes: 60}, 0, 60, 0},
		{Overrides{}, 0, 0, 20},
		{Overrides{Steps: 400000, CPUMinutes: 5}, 400000, 0, 5},
		{Overrides{CPUMinutes: 5}, 0, 0, 5},
	}
	for _, c := range cases {
		got := stored
		c.o.Apply(&got)
		if got.Steps != c.steps || got.Minutes != c.minutes || got.CPUMinutes != c.cpuMinutes {
			t.Errorf("%+v: steps %d, minutes %v, cpu_minutes %v; want %v, %v, %v", c.o, got.Steps, got.Minutes, got.CPUMinutes, c.steps, c.minutes, c.cpuMinutes)
		}
	}
}
