package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prismsbi/prism/checkpoint"
)

// asCLI makes the test binary act as the prism command when set in its
// environment, so that tests can run (and SIGKILL) a real child process
// without building one.
const asCLI = "PRISM_TEST_RUN_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(asCLI) == "1" {
		exitOnSignal(os.Stderr)
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// tinyTrainYAML is a lingauss-k6 run of a few milliseconds per step.
const tinyTrainYAML = `family: lingauss-k6
seed: 3
batch_size: 16
steps: 60
checkpoint_every: 5
log_every: 5
validation: {size: 32, every: 10}
network:
  model_dim: 16
  heads: 2
  head_dim: 8
  mlp_width: 2
  encoder_layers: 1
  mask_layers: 2
  param_layers: 2
  lambda_embed: 8
  noise_embed: 8
`

func writeTinyConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.yaml")
	if err := os.WriteFile(path, []byte(tinyTrainYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ckptFiles reads every file of dir's committed checkpoint.
func ckptFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	name := latestCheckpoint(dir)
	if name == "" {
		t.Fatalf("%s holds no checkpoint", dir)
	}
	files := map[string][]byte{checkpoint.LatestFile: []byte(name)}
	for _, f := range []string{checkpoint.CheckpointFile, checkpoint.EMAFile, checkpoint.StateFile, checkpoint.ConfigFile} {
		b, err := os.ReadFile(filepath.Join(dir, name, f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = b
	}
	return files
}

// TestTrainSIGKILLResume kills a real `prism train` child process with
// SIGKILL in the middle of its run, resumes it with --resume and checks
// that the final checkpoint is byte-identical to that of an uninterrupted
// run.
func TestTrainSIGKILLResume(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three short trainings")
	}
	cfg := writeTinyConfig(t)
	ref := filepath.Join(t.TempDir(), "ref")
	if code, _, errs := prism("train", "--config", cfg, "--out", ref, "--quiet"); code != 0 {
		t.Fatalf("uninterrupted run: exit %d: %s", code, errs)
	}

	dir := filepath.Join(t.TempDir(), "killed")
	var childErr bytes.Buffer
	cmd := exec.Command(os.Args[0], "train", "--config", cfg, "--out", dir, "--quiet")
	cmd.Env = append(os.Environ(), asCLI+"=1")
	cmd.Stderr = &childErr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Kill as soon as a checkpoint past step 10 is committed: the child is
	// then between checkpoints or writing one, with ~45 steps to go.
	deadline := time.After(60 * time.Second)
poll:
	for {
		select {
		case err := <-exited:
			t.Fatalf("child exited before it could be killed (%v): %s", err, childErr.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("child did not reach step 10 within 60 s")
		case <-time.After(2 * time.Millisecond):
			if name := latestCheckpoint(dir); name > "ckpt-000000000010" {
				break poll
			}
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child was not killed: %v (%s)", err, childErr.String())
	}
	killedAt := latestCheckpoint(dir)
	if killedAt == "ckpt-000000000060" {
		t.Fatal("child finished before the kill")
	}

	code, out, errs := prism("train", "--resume", dir, "--quiet")
	if code != 0 {
		t.Fatalf("resume: exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "trained to step 60") {
		t.Errorf("resume output %q", out)
	}
	t.Logf("killed with %s committed; resumed: %s", killedAt, strings.TrimSpace(out))
	a, b := ckptFiles(t, ref), ckptFiles(t, dir)
	for name, da := range a {
		if !bytes.Equal(da, b[name]) {
			t.Errorf("%s differs between the uninterrupted and the killed-and-resumed run", name)
		}
	}
}

func TestTrainCLIErrors(t *testing.T) {
	cfg := writeTinyConfig(t)
	dir := t.TempDir()
	badKey := filepath.Join(dir, "bad.yaml")
	os.WriteFile(badKey, []byte("family: lingauss-k6\nbatch_sise: 3\n"), 0o644)
	badNet := filepath.Join(dir, "badnet.yaml")
	os.WriteFile(badNet, []byte("family: lingauss-k6\nnetwork: {model_dimm: 3}\n"), 0o644)
	nonEmpty := filepath.Join(dir, "nonempty")
	os.MkdirAll(nonEmpty, 0o755)
	os.WriteFile(filepath.Join(nonEmpty, "f"), nil, 0o644)
	ck := filepath.Join(dir, "ck")
	if code, _, errs := prism("train", "--config", cfg, "--steps", "1", "--out", ck, "--quiet"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	out := filepath.Join(dir, "out")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--family", "nope", "--steps", "1", "--out", out}, "unknown family"},
		{[]string{"--config", badKey, "--steps", "1", "--out", out}, "batch_sise"},
		{[]string{"--config", badNet, "--steps", "1", "--out", out}, "model_dimm"},
		{[]string{"--config", cfg, "--family", "b3s", "--steps", "1", "--out", out}, "lingauss-k6"},
		{[]string{"--config", filepath.Join(dir, "missing.yaml"), "--out", out}, "missing.yaml"},
		{[]string{"--family", "lingauss-k6", "--out", out}, "--minutes or --steps"},
		{[]string{"--family", "lingauss-k6", "--steps", "3", "--minutes", "1", "--out", out}, "not both"},
		{[]string{"--family", "lingauss-k6", "--steps", "3"}, "--out"},
		{[]string{"--config", cfg, "--out", nonEmpty}, "not empty"},
		{[]string{"--config", cfg, "--out", ck}, "--resume"},
		{[]string{"--resume", nonEmpty}, "no checkpoint"},
		{[]string{"--resume", ck, "--config", cfg}, "--config"},
		{[]string{"--resume", ck, "--family", "b3s"}, "lingauss-k6"},
		{[]string{"--resume", ck, "--init-from", ck}, "--init-from"},
		{[]string{"--config", cfg, "--steps", "1", "--init-from", filepath.Join(dir, "nothing"), "--out", out}, "init_from"},
		{[]string{"--family", "b3s", "--steps", "1", "--init-from", ck, "--out", out}, "network configuration"},
		{[]string{"--config", cfg, "--steps", "1", "--replicas", "0", "--out", out}, "--replicas"},
		{[]string{"--config", cfg, "--steps", "1", "--replicas", "100000", "--out", out}, "replicas 100000"},
	}
	for _, c := range cases {
		code, _, errs := prism(append([]string{"train", "--quiet"}, c.args...)...)
		if code == 0 {
			t.Errorf("%v: exit 0", c.args)
			continue
		}
		if !strings.Contains(errs, c.want) {
			t.Errorf("%v: error %q does not mention %q", c.args, errs, c.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a failed train created its output directory")
	}
	// --replicas may change on --resume: the run continues on 2 replicas.
	more := filepath.Join(dir, "more")
	if code, _, errs := prism("train", "--resume", ck, "--out", more, "--steps", "2", "--replicas", "2"); code != 0 || !strings.Contains(errs, "on 2 replica(s)") {
		t.Errorf("--resume with --replicas 2: exit %d: %s", code, errs)
	}
	// A warm start from ck trains and logs where its weights came from.
	warm := filepath.Join(dir, "warm")
	if code, _, errs := prism("train", "--quiet", "--config", cfg, "--steps", "1", "--init-from", ck, "--out", warm); code != 0 {
		t.Fatalf("--init-from: exit %d: %s", code, errs)
	}
	if log, err := os.ReadFile(filepath.Join(warm, "log.jsonl")); err != nil || !strings.Contains(string(log), `"event":"init"`) || !strings.Contains(string(log), ck) {
		t.Errorf("warm-start log lacks the init event naming %s: %s %v", ck, log, err)
	}
}
