package train

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prismsbi/prism/checkpoint"
	"github.com/prismsbi/prism/engine/safetensors"
	"github.com/prismsbi/prism/family"
	_ "github.com/prismsbi/prism/family/dmri"
	_ "github.com/prismsbi/prism/family/lingauss"
	_ "github.com/prismsbi/prism/family/symbolic"
	"github.com/prismsbi/prism/internal/dirlock"
	"github.com/prismsbi/prism/network"
)

// tinyConfig is a lingauss-k6 run small enough to take a few seconds.
func tinyConfig(t testing.TB, steps int) Config {
	t.Helper()
	f, err := family.Lookup("lingauss-k6")
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig(f)
	c.Seed = 7
	c.BatchSize = 16
	c.Steps = steps
	c.CheckpointEvery = 7
	c.LogEvery = 3
	c.Validation = ValidationConfig{Size: 40, Every: 5}
	c.Prefetch, c.SimWorkers = 4, 2
	n := &c.Network
	n.ModelDim, n.Heads, n.HeadDim, n.MLPWidth = 16, 2, 8, 2
	n.EncoderLayers, n.MaskLayers, n.ParamLayers = 1, 2, 2
	n.LambdaEmbed, n.NoiseEmbed = 8, 8
	return c
}

func newTrainer(t testing.TB, cfg Config, dir string) *Trainer {
	t.Helper()
	tr, err := New(cfg, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// runToEnd runs tr to its end and releases its run folder's lock, as the
// finished process would, so that the test can resume the run.
func runToEnd(t testing.TB, tr *Trainer) Result {
	t.Helper()
	defer tr.lock.Release()
	res, err := tr.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// checkpointFiles returns the files of dir's committed checkpoint by name.
func checkpointFiles(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	name, err := checkpoint.Latest(dir)
	if err != nil || name == "" {
		t.Fatalf("no committed checkpoint in %s (%v)", dir, err)
	}
	out := map[string][]byte{"LATEST": nil}
	entries, err := os.ReadDir(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, name, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	out["LATEST"] = []byte(name)
	return out
}

// sameWeights fails unless the committed checkpoints of a and b hold
// bit-identical tensors and training state (for runs whose configurations
// differ only in settings that do not affect the numbers, which the
// checkpoint's metadata records).
func sameWeights(t testing.TB, a, b string) {
	t.Helper()
	fa, fb := checkpointFiles(t, a), checkpointFiles(t, b)
	for _, name := range []string{"LATEST", checkpoint.StateFile} {
		if !bytes.Equal(fa[name], fb[name]) {
			t.Errorf("%s differs between %s and %s", name, a, b)
		}
	}
	for _, name := range []string{checkpoint.CheckpointFile, checkpoint.EMAFile} {
		ta, _, err := safetensors.Decode(fa[name])
		if err != nil {
			t.Fatal(err)
		}
		tb, _, err := safetensors.Decode(fb[name])
		if err != nil {
			t.Fatal(err)
		}
		if len(ta) != len(tb) {
			t.Fatalf("%s: %d vs %d tensors", name, len(ta), len(tb))
		}
		for i := range ta {
			if ta[i].Name != tb[i].Name || !bitsEqual(ta[i].Data, tb[i].Data) {
				t.Errorf("%s: tensor %s differs between %s and %s", name, ta[i].Name, a, b)
				break
			}
		}
	}
}

func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// sameCheckpoint fails unless the committed checkpoints of a and b are
// byte-identical file by file.
func sameCheckpoint(t testing.TB, a, b string) {
	t.Helper()
	fa, fb := checkpointFiles(t, a), checkpointFiles(t, b)
	if len(fa) != len(fb) {
		t.Fatalf("checkpoints differ in their files: %d vs %d", len(fa), len(fb))
	}
	for name, da := range fa {
		if db, ok := fb[name]; !ok || !bytes.Equal(da, db) {
			t.Errorf("checkpoint file %s differs between %s and %s", name, a, b)
		}
	}
}

func TestSameSeedSameCheckpoint(t *testing.T) {
	cfg := tinyConfig(t, 12)
	dirs := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
	for i, d := range dirs {
		c := cfg
		if i == 1 {
			// Thread counts and buffer depth must not change the numbers.
			c.SimWorkers, c.Prefetch = 1, 1
		}
		res := runToEnd(t, newTrainer(t, c, d))
		if res.Step != 12 || res.StepsThisRun != 12 || res.Stopped != "steps" {
			t.Fatalf("run ended at step %d after %d steps (%s), want 12", res.Step, res.StepsThisRun, res.Stopped)
		}
	}
	// The configs differ in sim_workers and prefetch only.
	sameWeights(t, dirs[0], dirs[1])
	fa := checkpointFiles(t, dirs[0])
	// A different seed must give different weights (the comparison above
	// could otherwise pass vacuously).
	c := cfg
	c.Seed++
	d := filepath.Join(t.TempDir(), "c")
	runToEnd(t, newTrainer(t, c, d))
	if bytes.Equal(checkpointFiles(t, d)[checkpoint.CheckpointFile], fa[checkpoint.CheckpointFile]) {
		t.Error("a different seed gave the same weights")
	}
	// And the same everything gives byte-identical files, config included.
	d2 := filepath.Join(t.TempDir(), "d")
	runToEnd(t, newTrainer(t, cfg, d2))
	sameCheckpoint(t, dirs[0], d2)
}

func TestResumeAfterCrashMatchesUninterrupted(t *testing.T) {
	const steps = 30
	cfg := tinyConfig(t, steps)
	ref := filepath.Join(t.TempDir(), "ref")
	runToEnd(t, newTrainer(t, cfg, ref))

	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 2 {
		// Crash at a step that is not a checkpoint step, so that the resumed
		// run has to redo steps (and their validation) after the checkpoint.
		var crashAt int64
		for crashAt%int64(cfg.CheckpointEvery) == 0 {
			crashAt = 1 + r.Int64N(steps-2)
		}
		dir := filepath.Join(t.TempDir(), "crash")
		tr, err := New(cfg, dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		tr.opts.AfterStep = func(s int64) {
			if s == crashAt {
				cancel()
			}
		}
		if _, err := tr.Run(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("trial %d: Run after cancel returned %v, want context.Canceled", trial, err)
		}
		tr.Close()
		ck, err := loadCheckpoint(dir)
		if err != nil {
			t.Fatal(err)
		}
		if want := crashAt / int64(cfg.CheckpointEvery) * int64(cfg.CheckpointEvery); ck.state.Step != want {
			t.Fatalf("trial %d: crash at step %d left the checkpoint of step %d, want %d", trial, crashAt, ck.state.Step, want)
		}
		// Resume with different (numerically irrelevant) worker settings.
		rt, err := Resume(dir, "", func(c *Config) { c.SimWorkers, c.Prefetch = 1, 3 }, Options{})
		if err != nil {
			t.Fatal(err)
		}
		res := runToEnd(t, rt)
		rt.Close()
		if res.Step != steps || res.StepsThisRun != steps-ck.state.Step {
			t.Fatalf("trial %d: resumed run ended at step %d after %d steps", trial, res.Step, res.StepsThisRun)
		}
		t.Logf("trial %d: crash at step %d", trial, crashAt)
		sameWeights(t, ref, dir)
		// The log holds every step's record once.
		logData, err := os.ReadFile(filepath.Join(dir, checkpoint.LogFile))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(logData), `"val_loss"`); n != steps/cfg.Validation.Every {
			t.Errorf("trial %d: log has %d validation lines, want %d", trial, n, steps/cfg.Validation.Every)
		}
	}
}

// trainInTwoParts trains cfg for first steps, then resumes the run to
// cfg.Steps, and returns its directory.
func trainInTwoParts(t testing.TB, cfg Config, first int) string {
	t.Helper()
	part := cfg
	part.Steps = first
	dir := filepath.Join(t.TempDir(), "two-parts")
	tr := newTrainer(t, part, dir)
	runToEnd(t, tr)
	tr.Close()
	rt, err := Resume(dir, "", func(c *Config) { c.Steps = cfg.Steps }, Options{})
	if err != nil {
		t.Fatal(err)
	}
	runToEnd(t, rt)
	rt.Close()
	return dir
}

func TestResumeExtendsRun(t *testing.T) {
	// 10 steps, then resume to 20, equals 20 steps at once (apart from
	// config.json, which records the step target).
	cfg := tinyConfig(t, 20)
	ref := filepath.Join(t.TempDir(), "ref")
	runToEnd(t, newTrainer(t, cfg, ref))
	dir := trainInTwoParts(t, cfg, 10)
	sameCheckpoint(t, ref, dir)

	// Changing a numerically relevant field on resume is refused.
	if _, err := Resume(dir, "", func(c *Config) { c.BatchSize = 8 }, Options{}); err == nil {
		t.Error("Resume accepted a changed batch size")
	}
	// Resuming into another directory forks the run.
	fork := filepath.Join(t.TempDir(), "fork")
	ft, err := Resume(dir, fork, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ft.Close()
	if ft.Step() != 20 || !checkpoint.IsRunDir(fork) {
		t.Errorf("fork at step %d, checkpoint %v", ft.Step(), checkpoint.IsRunDir(fork))
	}
}

func TestPrefetchMatchesDirectSimulation(t *testing.T) {
	cfg := tinyConfig(t, 1)
	f, _ := family.Lookup(cfg.Family)
	net, err := network.New(f, cfg.Network, 1)
	if err != nil {
		t.Fatal(err)
	}
	streams := []stream{{sim: family.SimOptions{Seed: 3, Lambda: math.NaN(), Designs: nil}, noiseSeed: 4}}
	const bs, groups = 5, 7
	want := make([]family.Sample, bs*groups)
	family.SimulateBatch(f, streams[0].sim, 100, want)
	for _, workers := range []int{1, 2, 3} {
		p := newPrefetcher(f, net, streams, bs, 1, []uint64{100}, workers, 2*workers)
		for k := range groups {
			g, err := p.nextGroup(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if g.err != nil {
				t.Fatal(g.err)
			}
			if g.starts[0] != uint64(100+k*bs) {
				t.Fatalf("workers %d: group %d starts at %d, want %d", workers, k, g.starts[0], 100+k*bs)
			}
			for i, s := range g.samples[0] {
				w := want[k*bs+i]
				if s.Index != w.Index || !slices.Equal(s.X, w.X) || !slices.Equal(s.Mask, w.Mask) || s.Lambda != w.Lambda {
					t.Fatalf("workers %d: group %d sample %d differs from SimulateBatch", workers, k, i)
				}
			}
			p.release(g)
		}
		p.close()
	}
}

func TestNonFiniteGradientRestoresAndSkips(t *testing.T) {
	cfg := tinyConfig(t, 20)
	run := func(dir string) State {
		tr := newTrainer(t, cfg, dir)
		fired := false
		tr.fault = func(step int64) bool {
			if step == 10 && !fired {
				fired = true
				return true
			}
			return false
		}
		runToEnd(t, tr)
		return tr.State()
	}
	a := run(filepath.Join(t.TempDir(), "a"))
	if len(a.Skipped) != 1 {
		t.Fatalf("skips %+v, want one", a.Skipped)
	}
	sk := a.Skipped[0]
	// Step 10 failed; the last checkpoint was step 7; the failing batch was
	// the one after step 9's, samples [9·B, 10·B).
	if sk.Step != 10 || sk.RestoredStep != 7 || sk.Start[0] != 9*uint64(cfg.BatchSize) {
		t.Errorf("skip %+v, want step 10 restored to 7 from sample %d", sk, 9*cfg.BatchSize)
	}
	// 20 steps done; steps 8..20 used the data after the skipped batch.
	if a.Step != 20 || a.Next[0] != uint64(cfg.BatchSize)*(10+13) {
		t.Errorf("ended at step %d with next sample %d, want 20 and %d", a.Step, a.Next[0], cfg.BatchSize*23)
	}
	b := run(filepath.Join(t.TempDir(), "b"))
	if !slices.Equal(a.Next, b.Next) || len(b.Skipped) != 1 {
		t.Error("the restore-and-skip path is not deterministic")
	}
}

func TestOutputDirChecks(t *testing.T) {
	cfg := tinyConfig(t, 2)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, dir, Options{}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("New in a non-empty directory: %v", err)
	}
	ck := filepath.Join(t.TempDir(), "ck")
	runToEnd(t, newTrainer(t, cfg, ck))
	if _, err := New(cfg, ck, Options{}); err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Errorf("New over a checkpoint: %v", err)
	}
	if _, err := Resume(t.TempDir(), "", nil, Options{}); err == nil || !strings.Contains(err.Error(), "no checkpoint") {
		t.Errorf("Resume of an empty directory: %v", err)
	}
}

func TestCrashDuringCheckpointKeepsOld(t *testing.T) {
	cfg := tinyConfig(t, 7)
	dir := filepath.Join(t.TempDir(), "run")
	runToEnd(t, newTrainer(t, cfg, dir))
	before := checkpointFiles(t, dir)
	// The states a kill can leave behind before the commit: a half-written
	// temporary directory, a renamed but uncommitted checkpoint directory,
	// a temporary LATEST.
	for _, p := range []string{"." + checkpoint.Name(14) + ".tmp-123", checkpoint.Name(14)} {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p, checkpoint.CheckpointFile), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "."+checkpoint.LatestFile+".tmp-9"), []byte(checkpoint.Name(14)), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, err := Resume(dir, "", func(c *Config) { c.Steps = 14 }, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if rt.Step() != 7 {
		t.Fatalf("resumed at step %d, want 7", rt.Step())
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{dirlock.FileName, checkpoint.LatestFile, checkpoint.Name(7), checkpoint.LogFile}; !slices.Equal(names, want) {
		t.Errorf("after resume the directory holds %v, want %v", names, want)
	}
	after := checkpointFiles(t, dir)
	for name := range before {
		if !bytes.Equal(before[name], after[name]) {
			t.Errorf("%s changed", name)
		}
	}
	runToEnd(t, rt)
	if got, _ := checkpoint.Latest(dir); got != checkpoint.Name(14) {
		t.Errorf("LATEST = %s after finishing, want %s", got, checkpoint.Name(14))
	}
}

func TestValidationUsesEMAAndKeepsRawWeights(t *testing.T) {
	cfg := tinyConfig(t, 6)
	cfg.Validation.Every = 0
	tr := newTrainer(t, cfg, filepath.Join(t.TempDir(), "run"))
	runToEnd(t, tr)
	raw := tr.params.Tensors()
	before := make([][]float32, len(raw))
	for i, p := range raw {
		before[i] = slices.Clone(p.Data)
	}
	got := tr.validate()
	for i, p := range tr.params.Tensors() {
		if !slices.Equal(p.Data, before[i]) {
			t.Fatalf("validate changed parameter %s", p.Name)
		}
	}
	// Independent evaluation: a fresh network loaded with the EMA weights.
	f, _ := family.Lookup(cfg.Family)
	net, err := network.New(f, cfg.Network, 99)
	if err != nil {
		t.Fatal(err)
	}
	if err := net.Params().Assign(tr.opt.EMA(), ""); err != nil {
		t.Fatal(err)
	}
	other := *tr
	other.net, other.params = net, net.Params()
	want := other.evaluate()
	if got.Loss != want.Loss || got.MaskLoss != want.MaskLoss || got.ParamLoss != want.ParamLoss {
		t.Errorf("validation %+v, evaluation of the EMA weights %+v", got, want)
	}
	// After 6 steps the EMA (decay 0.999) is still close to the initial
	// weights, not to the raw ones: the raw weights must give a different
	// loss, or the test above could not tell them apart.
	raw0 := tr.evaluate()
	if raw0.Loss == got.Loss {
		t.Error("raw and EMA weights give the same validation loss")
	}
}

// TestTwoStreamsResume runs the dMRI path: two design streams of different
// lengths per step (UKB-like n = 105 and HCP-like n = 297), a crash between
// checkpoints and a resume, against an uninterrupted run.
func TestTwoStreamsResume(t *testing.T) {
	f, err := family.Lookup("b3s")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(f)
	cfg.Seed, cfg.BatchSize, cfg.Steps, cfg.CheckpointEvery, cfg.LogEvery = 5, 4, 8, 3, 2
	cfg.Designs = []string{"ukb-mix", "hcp-mix"}
	cfg.Validation = ValidationConfig{Size: 6, Every: 4}
	cfg.Prefetch, cfg.SimWorkers = 2, 2
	n := &cfg.Network
	n.ModelDim, n.Heads, n.HeadDim, n.MLPWidth = 16, 2, 8, 2
	n.EncoderLayers, n.MaskLayers, n.ParamLayers = 1, 1, 1
	n.LambdaEmbed, n.NoiseEmbed, n.Diffusion.BEmbed = 8, 8, 6

	ref := filepath.Join(t.TempDir(), "ref")
	runToEnd(t, newTrainer(t, cfg, ref))
	dir := filepath.Join(t.TempDir(), "crash")
	tr := newTrainer(t, cfg, dir)
	ctx, cancel := context.WithCancel(context.Background())
	tr.opts.AfterStep = func(s int64) {
		if s == 5 {
			cancel()
		}
	}
	if _, err := tr.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel: %v", err)
	}
	tr.Close()
	rt, err := Resume(dir, "", nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if rt.Step() != 3 {
		t.Fatalf("resumed at step %d, want 3", rt.Step())
	}
	runToEnd(t, rt)
	sameCheckpoint(t, ref, dir)
	st := rt.State()
	if want := []uint64{8 * 4, 8 * 4}; !slices.Equal(st.Next, want) {
		t.Errorf("next samples %v, want %v", st.Next, want)
	}
}
