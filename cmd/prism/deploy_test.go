package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/prismsbi/prism/bids"
)

// The scripts of deploy/ are run here as a scheduler would run them, with
// its environment variables, since no cluster is reachable: SLURM's
// through testdata/fake-sbatch (array tasks as concurrent processes),
// Kubernetes' by running each completion index of the manifests' Indexed
// Jobs as a process with the container's command, arguments and
// environment and JOB_COMPLETION_INDEX set. `prism` on their PATH is the
// test binary acting as the command.

const deployDir = "../../deploy"

// toolDir returns a folder with a `prism` that runs this test binary as
// the command (and, with sbatch, the fake sbatch), for PATH.
func toolDir(t *testing.T, sbatch bool) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	os.MkdirAll(bin, 0o755)
	script := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q \"$@\"\n", asCLI, os.Args[0])
	if err := os.WriteFile(filepath.Join(bin, "prism"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if sbatch {
		abs, _ := filepath.Abs("testdata/fake-sbatch")
		if err := os.Symlink(abs, filepath.Join(bin, "sbatch")); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// checkCohortOutput checks the group table of the test cohort.
func checkCohortOutput(t *testing.T, out string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, bids.GroupDir, "cohort.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
		f := strings.Split(line, "\t")
		got[f[2]] = f[3]
	}
	want := map[string]string{"sub-01": "ok", "sub-02_ses-1": "ok", "sub-02_ses-2": "ok", "sub-03": "failed"}
	if !mapsEqual(got, want) {
		t.Errorf("cohort.tsv statuses %v, want %v", got, want)
	}
}

// unshardedFit fits a crop of the bundled scan in one process and
// returns the input flags and the output folder.
func unshardedFit(t *testing.T, dir string) ([]string, string) {
	t.Helper()
	flags := cropBundled(t, dir, cropBlock{X0: 30, Y0: 30, Z0: 16, Nx: 12, Ny: 12, Nz: 2})
	full := filepath.Join(dir, "full")
	args := append(append(append([]string{"dmri", "fit"}, flags...), shardFitArgs...), "--out", full)
	if code, _, errs := prism(args...); code != 0 {
		t.Fatalf("unsharded fit: exit %d: %s", code, errs)
	}
	return flags, full
}

// TestDeploySLURM runs deploy/slurm/submit-cohort.sh and submit-shards.sh
// under the fake sbatch: the participants' array (one task failing on
// the broken subject), the group job after it, a rerun of one task alone
// (skipped: already fitted), then 4 shard tasks and their merge, which
// equals an unsharded fit byte for byte.
func TestDeploySLURM(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not available")
	}
	dir := t.TempDir()
	ds, out := filepath.Join(dir, "ds"), filepath.Join(dir, "out")
	makeCohort(t, ds)
	bin := toolDir(t, true)
	slurm := filepath.Join(dir, "slurm")
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "FAKE_SLURM_DIR="+slurm)
	run := func(script string, extraEnv []string, args ...string) (string, error) {
		cmd := exec.Command("bash", append([]string{filepath.Join(deployDir, "slurm", script)}, args...)...)
		cmd.Env = append(append([]string(nil), env...), extraEnv...)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	msg, err := run("submit-cohort.sh", nil, ds, out, "--samples", "4", "--steps", "2")
	if err != nil || !strings.Contains(msg, "(3 tasks)") {
		t.Fatalf("submit-cohort.sh: %v: %s", err, msg)
	}
	checkCohortOutput(t, out)
	logs, _ := filepath.Glob(filepath.Join(slurm, "job-*_*.log"))
	if len(logs) != 3 {
		t.Errorf("%d array task logs, want 3", len(logs))
	}
	failed, _ := filepath.Glob(filepath.Join(slurm, "job-*.failed"))
	if len(failed) != 1 {
		t.Errorf("failed jobs %v, want the participants' array only (sub-03's task)", failed)
	}
	// One task rerun alone (as `sbatch --array=1` would, 1-based here).
	msg, err = run("prism-bids-participant.sbatch", []string{"SLURM_ARRAY_TASK_ID=2", "SLURM_ARRAY_TASK_MIN=1"}, ds, out, "--samples", "4", "--steps", "2")
	if err != nil || !strings.Contains(msg, "participant 02") || strings.Count(msg, "already fitted") != 2 {
		t.Errorf("rerun of task 2 (sub-02): %v: %s", err, msg)
	}

	flags, full := unshardedFit(t, dir)
	sharded := filepath.Join(dir, "sharded")
	msg, err = run("submit-shards.sh", nil, append([]string{"4", sharded}, append(flags, shardFitArgs...)...)...)
	if err != nil || !strings.Contains(msg, "(4 tasks)") {
		t.Fatalf("submit-shards.sh: %v: %s", err, msg)
	}
	if failed, _ := filepath.Glob(filepath.Join(slurm, "job-*.failed")); len(failed) != 1 {
		t.Fatalf("failed jobs after the shards: %v", failed)
	}
	sameFolders(t, full, sharded)
}

// k8sJob is the part of a Job manifest the test runs.
type k8sJob struct {
	Kind     string
	Metadata struct{ Name string }
	Spec     struct {
		CompletionMode string `yaml:"completionMode"`
		Completions    int
		Template       struct {
			Spec struct {
				Containers []struct {
					Command, Args []string
					Env           []struct{ Name, Value string }
				}
			}
		}
	}
}

func readJobs(t *testing.T, file string) map[string]k8sJob {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "kubernetes", file))
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]k8sJob{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var j k8sJob
		if err := dec.Decode(&j); err != nil {
			break
		}
		if j.Kind != "Job" || len(j.Spec.Template.Spec.Containers) != 1 {
			t.Fatalf("%s: %s %s: want a Job with one container", file, j.Kind, j.Metadata.Name)
		}
		jobs[j.Metadata.Name] = j
	}
	return jobs
}

// runJob runs the completion indexes of a Job (all of them when it is
// Indexed, concurrently; else one pod) with the container's command and
// environment, the given variables overriding the manifest's, and
// returns each pod's exit error and output.
func runJob(t *testing.T, j k8sJob, bin string, override map[string]string) ([]error, []string) {
	t.Helper()
	c := j.Spec.Template.Spec.Containers[0]
	n := 1
	if j.Spec.CompletionMode == "Indexed" {
		n = j.Spec.Completions
	}
	errs, outs := make([]error, n), make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		for _, e := range c.Env {
			v, ok := override[e.Name]
			if !ok {
				v = e.Value
			}
			env = append(env, e.Name+"="+v)
		}
		if j.Spec.CompletionMode == "Indexed" {
			env = append(env, "JOB_COMPLETION_INDEX="+strconv.Itoa(i))
		}
		cmd := exec.Command(c.Command[0], append(c.Command[1:], c.Args...)...)
		cmd.Env = env
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := cmd.CombinedOutput()
			errs[i], outs[i] = err, string(b)
		}()
	}
	wg.Wait()
	return errs, outs
}

// TestDeployKubernetes runs the Indexed Jobs of deploy/kubernetes: the
// participants (index 2, the broken sub-03, fails), the group Job, the 4
// shards of one scan and their merge, which equals an unsharded fit.
func TestDeployKubernetes(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not available")
	}
	dir := t.TempDir()
	ds, out := filepath.Join(dir, "ds"), filepath.Join(dir, "out")
	makeCohort(t, ds)
	bin := toolDir(t, false)

	jobs := readJobs(t, "prism-bids-job.yaml")
	part, group := jobs["prism-bids-participants"], jobs["prism-bids-group"]
	if part.Spec.CompletionMode != "Indexed" || part.Spec.Completions != 3 {
		t.Fatalf("participants Job: %s, %d completions (want Indexed, 3 for the test cohort)", part.Spec.CompletionMode, part.Spec.Completions)
	}
	override := map[string]string{"BIDS_DIR": ds, "OUT_DIR": out, "PRISM_BIDS_FLAGS": "--samples 4 --steps 2", "GOMAXPROCS": "1"}
	errs, outs := runJob(t, part, bin, override)
	for i, err := range errs {
		if (err != nil) != (i == 2) {
			t.Errorf("index %d: %v (only index 2, sub-03, should fail): %s", i, err, outs[i])
		}
	}
	override["POLL_SECONDS"] = "1"
	if errs, outs := runJob(t, group, bin, override); errs[0] != nil {
		t.Fatalf("group Job: %v: %s", errs[0], outs[0])
	}
	checkCohortOutput(t, out)

	flags, full := unshardedFit(t, dir)
	jobs = readJobs(t, "prism-fit-shards-job.yaml")
	shards, merge := jobs["prism-fit-shards"], jobs["prism-fit-merge"]
	for _, j := range []k8sJob{shards, merge} {
		for _, e := range j.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "SHARDS" && e.Value != strconv.Itoa(shards.Spec.Completions) {
				t.Errorf("%s: SHARDS=%s but the shards Job has %d completions", j.Metadata.Name, e.Value, shards.Spec.Completions)
			}
		}
	}
	sharded := filepath.Join(dir, "sharded")
	override = map[string]string{"OUT_DIR": sharded, "PRISM_FIT_FLAGS": strings.Join(append(flags, shardFitArgs...), " "), "GOMAXPROCS": "1", "POLL_SECONDS": "1"}
	errs, outs = runJob(t, shards, bin, override)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("shard index %d: %v: %s", i, err, outs[i])
		}
	}
	if errs, outs := runJob(t, merge, bin, override); errs[0] != nil {
		t.Fatalf("merge Job: %v: %s", errs[0], outs[0])
	}
	sameFolders(t, full, sharded)
}
