package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/internal/dirlock"
)

// shardFitArgs are the `dmri fit` settings of the shard tests: the
// shipped b3s-brain network with few samples and steps (the tests check
// bytes, not posterior quality).
var shardFitArgs = []string{"--model", "b3s-brain", "--samples", "4", "--steps", "2", "--quiet"}

// startShard starts `prism dmri fit --shard I/N` as a child process
// (the test binary acting as prism) with extra environment variables.
func startShard(t *testing.T, args []string, env ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asCLI+"=1"), env...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &errb
}

// sameFolders checks that every file of want (but run.json, whose
// timings differ between any two runs, and the folder lock, which names
// the process that held it) exists in got with the same bytes.
func sameFolders(t *testing.T, want, got string) {
	t.Helper()
	entries, err := os.ReadDir(want)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() || e.Name() == "run.json" || e.Name() == dirlock.FileName {
			continue
		}
		a, _ := os.ReadFile(filepath.Join(want, e.Name()))
		b, err := os.ReadFile(filepath.Join(got, e.Name()))
		if err != nil {
			t.Errorf("%s: %v", e.Name(), err)
			continue
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from the unsharded fit (%d vs %d bytes)", e.Name(), len(b), len(a))
		}
		n++
	}
	if n < 20 {
		t.Errorf("only %d files compared", n)
	}
}

// TestDMRIFitShardsMerge runs 4 shards of a fit of a crop of the bundled
// scan as 4 concurrent processes, kills one (SIGKILL) after its first
// finished batch, checks that the merge refuses the incomplete set and
// names the shard, reruns that shard alone (it continues from its state)
// and merges: every output file equals the unsharded fit's byte for byte.
// A finished shard run again does nothing.
func TestDMRIFitShardsMerge(t *testing.T) {
	dir := t.TempDir()
	flags := cropBundled(t, dir, cropBlock{X0: 28, Y0: 26, Z0: 18, Nx: 16, Ny: 16, Nz: 2})
	fit := append(append([]string{"dmri", "fit"}, flags...), shardFitArgs...)
	full := filepath.Join(dir, "full")
	if code, _, errs := prism(append(fit, "--out", full)...); code != 0 {
		t.Fatalf("unsharded fit: exit %d: %s", code, errs)
	}

	out := filepath.Join(dir, "sharded")
	const killed = 2
	var cmds []*exec.Cmd
	var errs []*bytes.Buffer
	for i := range 4 {
		args := append(fit, "--out", out, "--shard", dmrifit.Shard{Index: i, Count: 4}.String())
		if i == killed {
			args = append(args, "--batch", "1") // many small records: there is time to kill it halfway
		}
		c, e := startShard(t, args)
		cmds, errs = append(cmds, c), append(errs, e)
	}
	victim := dmrifit.Shard{Index: killed, Count: 4}
	exited := make(chan error, 1)
	go func() { exited <- cmds[killed].Wait() }()
	deadline := time.After(2 * time.Minute)
	var killedAt int64
poll:
	for {
		select {
		case err := <-exited:
			t.Fatalf("shard %v exited before it could be killed (%v): %s", victim, err, errs[killed])
		case <-deadline:
			t.Fatal("shard did not write a batch within 2 minutes")
		case <-time.After(time.Millisecond):
			// The header line and the key, then ≥ 1 record.
			if fi, err := os.Stat(victim.StatePath(out)); err == nil && fi.Size() > 2000 {
				cmds[killed].Process.Kill()
				<-exited
				killedAt = fi.Size()
				break poll
			}
		}
	}
	for i, c := range cmds {
		if i != killed {
			if err := c.Wait(); err != nil {
				t.Fatalf("shard %d: %v: %s", i, err, errs[i])
			}
		}
	}
	if _, err := os.Stat(victim.PartPath(out)); err == nil {
		t.Fatal("the killed shard has a finished part")
	}
	t.Logf("killed shard %v with a %d-byte state", victim, killedAt)

	code, _, stderr := prism("dmri", "merge", out)
	if code == 0 || !strings.Contains(stderr, "shard 2/4 unfinished") {
		t.Errorf("merge of an incomplete set: exit %d, %q (want it to name shard 2/4 as unfinished)", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "dyads1"+dmrifit.OutputExt)); err == nil {
		t.Error("an incomplete merge wrote outputs")
	}

	// Rerun the killed shard alone (through --shard auto and SLURM's
	// variables, with a 1-based array): it continues from its state.
	c, e := startShard(t, append(fit, "--out", out, "--shard", "auto"),
		"SLURM_ARRAY_TASK_ID=3", "SLURM_ARRAY_TASK_MIN=1", "SLURM_ARRAY_TASK_COUNT=4")
	if err := c.Wait(); err != nil {
		t.Fatalf("rerun of shard %v: %v: %s", victim, err, e)
	}
	if !strings.Contains(e.String(), "continuing") {
		t.Errorf("the rerun shard did not continue its state: %s", e)
	}
	// A finished shard is skipped (Kubernetes' index, N from --shards).
	c, e = startShard(t, append(fit, "--out", out, "--shard", "auto", "--shards", "4"), "JOB_COMPLETION_INDEX=0")
	if err := c.Wait(); err != nil || !strings.Contains(e.String(), "already finished") {
		t.Errorf("rerun of the finished shard 0/4: %v, %q", err, e)
	}

	if code, _, stderr := prism("dmri", "merge", out); code != 0 {
		t.Fatalf("merge: exit %d: %s", code, stderr)
	}
	sameFolders(t, full, out)
	if _, err := os.Stat(filepath.Join(out, dmrifit.StateFile)); err == nil {
		t.Error("the merge left the whole-scan state behind")
	}
	var info struct {
		Shards []struct {
			Shard string `json:"shard"`
		} `json:"merged_shards"`
	}
	readJSON(t, filepath.Join(out, "run.json"), &info)
	if len(info.Shards) != 4 {
		t.Errorf("run.json lists %d shards, want 4", len(info.Shards))
	}
}

// TestDMRIFitShardErrors: a bad --shard, or --shard auto outside a job
// array, fails naming the flag or the variables, and writes nothing.
func TestDMRIFitShardErrors(t *testing.T) {
	for _, v := range []string{"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "JOB_COMPLETION_INDEX"} {
		t.Setenv(v, "")
	}
	dir := t.TempDir()
	flags := cropBundled(t, dir, cropBlock{X0: 30, Y0: 30, Z0: 18, Nx: 4, Ny: 4, Nz: 1})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--shard", "4/4"}, "0 ≤ I < N"},
		{[]string{"--shard", "1of4"}, "want I/N"},
		{[]string{"--shard", "1/4", "--shards", "3"}, "--shards 3"},
		{[]string{"--shard", "auto"}, "SLURM_ARRAY_TASK_ID"},
		{[]string{"--shard", "auto", "--shards", "4"}, "JOB_COMPLETION_INDEX"},
	} {
		out := filepath.Join(dir, "out")
		args := append(append(append(append([]string{"dmri", "fit"}, flags...), shardFitArgs...), "--out", out), c.args...)
		code, _, stderr := prism(args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q (want %q)", c.args, code, stderr, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: output folder created", c.args)
			os.RemoveAll(out)
		}
	}
	if code, _, stderr := prism("dmri", "merge", filepath.Join(dir, "nothing")); code == 0 || !strings.Contains(stderr, "no shard records") {
		t.Errorf("merge of a folder without shards: exit %d, %q", code, stderr)
	}
}
