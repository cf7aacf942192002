package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/prismsbi/prism/dmrifit"
)

// shardRecord is shards/shard-I-of-N.json: what `prism dmri merge` needs
// to rebuild the fit (the flags of `dmri fit` with absolute paths, the
// state key) and what the shard did.
type shardRecord struct {
	Shard       dmrifit.Shard       `json:"shard"`
	Voxels      [2]int              `json:"voxels"` // positions [lo, hi) in the scan's fitted voxels
	TotalVoxels int                 `json:"total_voxels"`
	FitArgs     []string            `json:"fit_args"`
	Key         string              `json:"key"`
	Shape       dmrifit.ResultShape `json:"shape"`
	Host        string              `json:"host"`
	Started     string              `json:"started"`
	Finished    string              `json:"finished,omitempty"`
	Resumed     int                 `json:"resumed_voxels"`
	FitSeconds  float64             `json:"fit_s,omitempty"`
	FitCPU      float64             `json:"fit_cpu_s,omitempty"`
}

// shardRun is the part of `dmri fit` that runs one shard.
type shardRun struct {
	spec   string // "I/N" or "auto"
	count  int    // --shards, for auto under Kubernetes
	flags  *flag.FlagSet
	out    string
	fresh  bool
	quiet  bool
	key    []byte
	fitter *dmrifit.Fitter
	scan   *dmrifit.Scan
}

// mergeArgs are the flags of `dmri fit` that a merge replays: everything
// set except those that only concern the shard, the run's display or
// its batch size (which does not change the numbers).
func mergeArgs(fs *flag.FlagSet) ([]string, error) {
	paths := map[string]bool{"dwi": true, "bval": true, "bvec": true, "mask": true, "checkpoint": true}
	var args []string
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "shard", "shards", "out", "fresh", "quiet", "batch": // batch: no effect on the numbers
			return
		}
		v := f.Value.String()
		if paths[f.Name] && v != "" {
			abs, e := filepath.Abs(v)
			if e != nil {
				err = fmt.Errorf("--%s: %w", f.Name, e)
			}
			v = abs
		}
		args = append(args, "--"+f.Name+"="+v)
	})
	return args, err
}

// resolveShard parses --shard (I/N or auto, with --shards).
func resolveShard(spec string, count int) (dmrifit.Shard, error) {
	if spec == "auto" {
		sh, err := dmrifit.ShardFromEnv(os.Getenv, count)
		if err != nil {
			return sh, fmt.Errorf("--shard: %w", err)
		}
		return sh, nil
	}
	sh, err := dmrifit.ParseShard(spec)
	if err != nil {
		return sh, fmt.Errorf("--shard: %w", err)
	}
	if count > 0 && count != sh.Count {
		return sh, fmt.Errorf("--shard %s but --shards %d", spec, count)
	}
	return sh, nil
}

func runFitShard(r shardRun, stderr io.Writer) error {
	sh, err := resolveShard(r.spec, r.count)
	if err != nil {
		return err
	}
	args, err := mergeArgs(r.flags)
	if err != nil {
		return err
	}
	total := len(r.scan.Voxels)
	lo, hi := sh.Range(total)
	key := sh.Key(r.key, total)
	shape := r.fitter.Shape()
	if _, err := dmrifit.ReadShardPart(sh.PartPath(r.out), key, shape, hi-lo); err == nil && !r.fresh {
		fmt.Fprintf(stderr, "dmri fit: shard %v already finished (%s); nothing to do\n", sh, sh.PartPath(r.out))
		return nil
	}
	if err := os.MkdirAll(filepath.Join(r.out, dmrifit.ShardsDir), 0o755); err != nil {
		return err
	}
	if r.fresh {
		os.Remove(sh.PartPath(r.out))
	}
	host, _ := os.Hostname()
	rec := shardRecord{Shard: sh, Voxels: [2]int{lo, hi}, TotalVoxels: total, FitArgs: args, Key: string(r.key),
		Shape: shape, Host: host, Started: time.Now().UTC().Format(time.RFC3339)}
	st, err := dmrifit.OpenFitState(sh.StatePath(r.out), key, shape, r.fresh)
	if err != nil {
		return err
	}
	defer st.Close()
	rec.Resumed = st.Done
	if err := dmrifit.WriteJSON(sh.RecordPath(r.out), rec); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "dmri fit: shard %v: voxels [%d, %d) of %d", sh, lo, hi, total)
	if st.Done > 0 {
		fmt.Fprintf(stderr, ", continuing: %d already done", st.Done)
	}
	fmt.Fprintln(stderr)

	ctx, stop := interruptContext(stderr, "dmri fit: stopping after this batch; rerun the same command to continue the shard")
	defer stop()
	start, cpu := time.Now(), cpuSeconds()
	var progress func(int)
	var bar *progressBar
	if !r.quiet && hi > lo {
		bar = newProgressBar(stderr, isTerminal(stderr), "dmri fit shard "+sh.String(), hi-lo, st.Done, start)
		progress = bar.update
	}
	err = r.fitter.FitShard(ctx, r.scan, sh, st, progress)
	if bar != nil {
		bar.finish()
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("interrupted; %s keeps the finished batches", sh.StatePath(r.out))
		}
		return err
	}
	rec.FitSeconds, rec.FitCPU = time.Since(start).Seconds(), cpuSeconds()-cpu
	if err := dmrifit.CompleteShard(st, sh.PartPath(r.out), hi-lo); err != nil {
		return err
	}
	rec.Finished = time.Now().UTC().Format(time.RFC3339)
	if err := dmrifit.WriteJSON(sh.RecordPath(r.out), rec); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "dmri fit: shard %v done: %d voxels in %.1f s; when all %d shards are done: prism dmri merge %s\n",
		sh, hi-lo, rec.FitSeconds, sh.Count, r.out)
	return nil
}
