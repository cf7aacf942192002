package dmrifit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/internal/progress"
)

// ShardRecord is shards/shard-I-of-N.json: what `prism dmri merge` needs
// to rebuild the fit (the arguments of `dmri fit` with absolute paths,
// the state key) and what the shard did.
type ShardRecord struct {
	Shard       Shard       `json:"shard"`
	Voxels      [2]int      `json:"voxels"` // positions [lo, hi) in the scan's fitted voxels
	TotalVoxels int         `json:"total_voxels"`
	FitArgs     []string    `json:"fit_args"`
	Key         string      `json:"key"`
	Shape       ResultShape `json:"shape"`
	Host        string      `json:"host"`
	Started     string      `json:"started"`
	Finished    string      `json:"finished,omitempty"`
	Resumed     int         `json:"resumed_voxels"`
	FitSeconds  float64     `json:"fit_s,omitempty"`
	FitCPU      float64     `json:"fit_cpu_s,omitempty"`
}

// shard fits the shard's voxels into Out/shards: its own resumable state,
// its record, and, when complete, its part file. A finished shard is not
// fitted again unless Fresh.
func (r *run) shard(ctx context.Context, fitter *Fitter, fitKey []byte) error {
	sh, out := r.cfg.Shard.Shard, r.cfg.Out
	total := len(r.scan.Voxels)
	lo, hi := sh.Range(total)
	key := sh.Key(fitKey, total)
	shape := fitter.Shape()
	if _, err := ReadShardPart(sh.PartPath(out), key, shape, hi-lo); err == nil && !r.cfg.Fresh {
		r.logf("shard %v already finished (%s); nothing to do", sh, sh.PartPath(out))
		return nil
	}
	if err := os.MkdirAll(filepath.Join(out, ShardsDir), 0o755); err != nil {
		return fmt.Errorf("dmri: %w", err)
	}
	if r.cfg.Fresh {
		os.Remove(sh.PartPath(out))
	}
	host, _ := os.Hostname()
	rec := ShardRecord{Shard: sh, Voxels: [2]int{lo, hi}, TotalVoxels: total, FitArgs: r.cfg.Shard.FitArgs, Key: string(fitKey),
		Shape: shape, Host: host, Started: time.Now().UTC().Format(time.RFC3339)}
	st, err := OpenFitState(sh.StatePath(out), key, shape, r.cfg.Fresh)
	if err != nil {
		return err
	}
	defer st.Close()
	rec.Resumed = st.Done()
	if err := atomicfile.WriteJSON(sh.RecordPath(out), rec); err != nil {
		return err
	}
	if st.Done() > 0 {
		r.logf("shard %v: voxels [%d, %d) of %d, continuing: %d already done", sh, lo, hi, total, st.Done())
	} else {
		r.logf("shard %v: voxels [%d, %d) of %d", sh, lo, hi, total)
	}

	start, cpu := time.Now(), cpuSeconds()
	bar := progress.Begin(nil, "", 0, 0)
	if hi > lo {
		bar = progress.Begin(r.cfg.Progress, "dmri fit shard "+sh.String(), hi-lo, st.Done())
	}
	err = fitter.FitShard(ctx, r.scan, sh, st, bar.Update)
	bar.Finish()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return interruptedError{fmt.Sprintf("interrupted; %s keeps the finished batches", sh.StatePath(out)), err}
		}
		return err
	}
	rec.FitSeconds, rec.FitCPU = time.Since(start).Seconds(), cpuSeconds()-cpu
	if err := CompleteShard(st, sh.PartPath(out), hi-lo); err != nil {
		return err
	}
	rec.Finished = time.Now().UTC().Format(time.RFC3339)
	if err := atomicfile.WriteJSON(sh.RecordPath(out), rec); err != nil {
		return err
	}
	r.logf("shard %v done: %d voxels in %.1f s; when all %d shards are done: prism dmri merge %s", sh, hi-lo, rec.FitSeconds, sh.Count, out)
	return nil
}

// PrepareMerge reads the records of the shards in dir/shards, checks that
// all N shards of one fit are finished, and joins their parts into the
// whole-scan partial state dir/StateFile (MergeShards), from which a
// replay of `dmri fit` with the records' FitArgs writes the unsharded
// outputs. It returns the records sorted by shard index.
func PrepareMerge(dir string) ([]ShardRecord, error) {
	recs, err := readShardRecords(dir)
	if err != nil {
		return nil, err
	}
	first := recs[0]
	for _, r := range recs[1:] {
		if r.Key != first.Key || r.Shard.Count != first.Shard.Count || !slices.Equal(r.FitArgs, first.FitArgs) {
			return nil, fmt.Errorf("%s: shard %v and shard %v come from different fits (settings, network or scan differ)",
				filepath.Join(dir, ShardsDir), first.Shard, r.Shard)
		}
	}
	if err := MergeShards(dir, filepath.Join(dir, StateFile), []byte(first.Key), first.Shape, first.TotalVoxels, first.Shard.Count); err != nil {
		return nil, err
	}
	return recs, nil
}

// readShardRecords reads every shards/shard-*-of-*.json of dir, sorted
// by shard index.
func readShardRecords(dir string) ([]ShardRecord, error) {
	paths, err := filepath.Glob(filepath.Join(dir, ShardsDir, "shard-*-of-*.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%s: no shard records (shard-I-of-N.json); run `prism dmri fit --shard I/N --out %s` first", filepath.Join(dir, ShardsDir), dir)
	}
	var recs []ShardRecord
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r ShardRecord
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if err := r.Shard.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		recs = append(recs, r)
	}
	slices.SortFunc(recs, func(a, b ShardRecord) int { return a.Shard.Index - b.Shard.Index })
	return recs, nil
}

// AnnotateMerge adds the shards' records to the merged fit's run.json at
// path (whose timings are those of the merge, the fitting having happened
// in the shards).
func AnnotateMerge(path string, recs []ShardRecord) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var info map[string]any
	if err := json.Unmarshal(b, &info); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	type shardSummary struct {
		Shard      string  `json:"shard"`
		Voxels     [2]int  `json:"voxels"`
		Host       string  `json:"host"`
		Finished   string  `json:"finished"`
		FitSeconds float64 `json:"fit_s"`
		FitCPU     float64 `json:"fit_cpu_s"`
	}
	var sum []shardSummary
	var fit, cpu float64
	for _, r := range recs {
		sum = append(sum, shardSummary{r.Shard.String(), r.Voxels, r.Host, r.Finished, r.FitSeconds, r.FitCPU})
		fit += r.FitSeconds
		cpu += r.FitCPU
	}
	info["merged_shards"] = sum
	info["shards_fit_s_total"] = fit
	info["shards_fit_cpu_s_total"] = cpu
	return atomicfile.WriteJSON(path, info)
}
