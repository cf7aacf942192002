package train

import (
	"math"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/prismsbi/prism/checkpoint"
	"github.com/prismsbi/prism/engine/safetensors"
)

// TestScheduleFactor checks the decay against its closed forms at the
// points where they are simple: 1 before and at Start, the midpoint
// (1+Final)/2 for both shapes, Final at and after the end, and a quarter
// of the way for each (cosine: Final + (1−Final)(1+cos π/4)/2).
func TestScheduleFactor(t *testing.T) {
	const final = 0.1
	cos := Schedule{Kind: "cosine", Start: 100, Steps: 400, Final: final}
	lin := Schedule{Kind: "linear", Start: 100, Steps: 400, Final: final}
	cases := []struct {
		s    Schedule
		step int64
		want float64
	}{
		{cos, 1, 1}, {cos, 100, 1}, {cos, 300, (1 + final) / 2}, {cos, 500, final}, {cos, 9000, final},
		{cos, 200, final + (1-final)*(1+math.Cos(math.Pi/4))/2},
		{lin, 100, 1}, {lin, 300, (1 + final) / 2}, {lin, 200, 1 - (1-final)/4}, {lin, 700, final},
		{Schedule{}, 12345, 1}, {Schedule{Kind: "constant"}, 7, 1},
	}
	for _, c := range cases {
		if got := c.s.Factor(c.step); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%+v at step %d: factor %.15g, want %.15g", c.s, c.step, got, c.want)
		}
	}
}

func TestParseSchedule(t *testing.T) {
	s, err := ParseSchedule("cosine:10:2000:0.05")
	if err != nil || s != (Schedule{Kind: "cosine", Start: 10, Steps: 2000, Final: 0.05}) {
		t.Errorf("ParseSchedule = %+v, %v", s, err)
	}
	if back, err := ParseSchedule(s.String()); err != nil || back != s {
		t.Errorf("String %q does not parse back: %+v, %v", s.String(), back, err)
	}
	if s, err := ParseSchedule("constant"); err != nil || s.Factor(99) != 1 || s.String() != "" {
		t.Errorf("constant: %+v, %v", s, err)
	}
	for _, bad := range []string{"", "cosine", "cosine:0:100", "step:0:100:0.1", "cosine:-1:100:0.1",
		"cosine:0:0:0.1", "cosine:0:100:0", "cosine:0:100:1.5", "cosine:x:100:0.1", "linear:0:100:NaN"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("ParseSchedule(%q) accepted", bad)
		}
	}
}

// TestScheduledRunResumes checks that the schedule is applied (a decayed
// run ends with other weights than the constant-rate run), that it is a
// function of the step only (10 steps, then resuming to 20, equals 20 at
// once), and that a resumed run may change its schedule but nothing else.
func TestScheduledRunResumes(t *testing.T) {
	cfg := tinyConfig(t, 20)
	constant := filepath.Join(t.TempDir(), "constant")
	runToEnd(t, newTrainer(t, cfg, constant))

	cfg.Optimizer.Schedule = Schedule{Kind: "cosine", Start: 4, Steps: 12, Final: 0.05}
	ref := filepath.Join(t.TempDir(), "ref")
	runToEnd(t, newTrainer(t, cfg, ref))
	ta, _, err := safetensors.Decode(checkpointFiles(t, constant)[checkpoint.CheckpointFile])
	if err != nil {
		t.Fatal(err)
	}
	tb, _, err := safetensors.Decode(checkpointFiles(t, ref)[checkpoint.CheckpointFile])
	if err != nil {
		t.Fatal(err)
	}
	differ := 0
	for i := range ta {
		if !bitsEqual(ta[i].Data, tb[i].Data) {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("a cosine-scheduled run gave the weights of the constant-rate run")
	}

	dir := trainInTwoParts(t, cfg, 10)
	sameCheckpoint(t, ref, dir)

	// Annealing a finished run: a new schedule is accepted on resume.
	at, err := Resume(dir, filepath.Join(t.TempDir(), "anneal"), func(c *Config) {
		c.Steps = 30
		c.Optimizer.Schedule = Schedule{Kind: "linear", Start: 20, Steps: 10, Final: 0.1}
	}, Options{})
	if err != nil {
		t.Fatalf("resume with a new schedule: %v", err)
	}
	if res := runToEnd(t, at); res.Step != 30 {
		t.Errorf("annealed run ended at step %d", res.Step)
	}
	at.Close()
	// The replaced schedule is recorded with the last step it governed.
	ck, err := loadCheckpoint(at.dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []ScheduleSpan{{Until: 20, Schedule: cfg.Optimizer.Schedule}}
	if got := ck.cfg.Optimizer.EarlierSchedules; !reflect.DeepEqual(got, want) {
		t.Errorf("annealed run's earlier schedules %+v, want %+v", got, want)
	}
	if _, err := Resume(dir, "", func(c *Config) { c.Optimizer.LR *= 2 }, Options{}); err == nil {
		t.Error("Resume accepted a changed base learning rate")
	}
}

// TestRecordScheduleChange: a resumed run records the schedule it replaces
// exactly when its own schedule would give the steps already taken other
// rates, and keeps what earlier resumes recorded.
func TestRecordScheduleChange(t *testing.T) {
	cos := func(start, steps int) Schedule {
		return Schedule{Kind: "cosine", Start: start, Steps: steps, Final: 0.05}
	}
	older := []ScheduleSpan{{Until: 50, Schedule: cos(0, 50)}}
	cases := []struct {
		name      string
		prev, cur Schedule
		earlier   []ScheduleSpan
		step      int64
		want      []ScheduleSpan
	}{
		{"same schedule", cos(0, 100), cos(0, 100), nil, 60, nil},
		{"constant annealed from the resume step", Schedule{}, cos(100, 20), nil, 100, nil},
		{"constant annealed later", Schedule{Kind: "constant"}, cos(150, 20), nil, 100, nil},
		{"constant annealed from an earlier step", Schedule{}, cos(80, 40), nil, 100, []ScheduleSpan{{100, Schedule{}}}},
		{"decay restarted", cos(0, 100), cos(100, 60), nil, 100, []ScheduleSpan{{100, cos(0, 100)}}},
		{"decay made constant", cos(0, 100), Schedule{Kind: "constant"}, nil, 40, []ScheduleSpan{{40, cos(0, 100)}}},
		{"second restart", cos(50, 50), cos(100, 60), older, 100, []ScheduleSpan{older[0], {100, cos(50, 50)}}},
		{"fresh run", cos(0, 100), cos(0, 50), nil, 0, nil},
	}
	for _, c := range cases {
		prev := OptimConfig{Schedule: c.prev, EarlierSchedules: c.earlier}
		next := OptimConfig{Schedule: c.cur, EarlierSchedules: c.earlier}
		recordScheduleChange(&prev, &next, c.step)
		if !reflect.DeepEqual(next.EarlierSchedules, c.want) {
			t.Errorf("%s: earlier schedules %+v, want %+v", c.name, next.EarlierSchedules, c.want)
		}
		if !reflect.DeepEqual(prev.EarlierSchedules, c.earlier) {
			t.Errorf("%s: the checkpoint's own record changed to %+v", c.name, prev.EarlierSchedules)
		}
	}
}
