package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/prismsbi/prism/dmrifit"
)

func init() {
	dmriCommands["merge"] = command{
		summary: "join the shards of `dmri fit --shard I/N` into the folder an unsharded fit writes (byte for byte)",
		run:     runDMRIMerge,
	}
}

// runDMRIMerge joins the finished shards in DIR/shards: it checks that
// all N parts exist and belong to the same fit, writes them as the
// whole-scan partial state and replays `dmri fit` with the shards'
// flags, which finds every voxel done and writes the outputs.
func runDMRIMerge(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dmri merge", "DIR (the --out folder of `prism dmri fit --shard`)", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("give one folder, the --out of the shards")
	}
	dir := fs.Arg(0)
	recs, err := readShardRecords(dir)
	if err != nil {
		return err
	}
	first := recs[0]
	for _, r := range recs[1:] {
		if r.Key != first.Key || r.Shard.Count != first.Shard.Count || !slices.Equal(r.FitArgs, first.FitArgs) {
			return fmt.Errorf("%s: shard %v and shard %v come from different fits (settings, network or scan differ)",
				filepath.Join(dir, dmrifit.ShardsDir), first.Shard, r.Shard)
		}
	}
	n := first.Shard.Count
	state := filepath.Join(dir, dmrifit.StateFile)
	if err := dmrifit.MergeShards(dir, state, []byte(first.Key), first.Shape, first.TotalVoxels, n); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "dmri merge: %d shards, %d voxels; writing %s\n", n, first.TotalVoxels, dir)
	fitArgs := append(slices.Clone(first.FitArgs), "--out", dir, "--quiet")
	if err := runDMRIFit(fitArgs, stdout, stderr); err != nil {
		return fmt.Errorf("dmri merge: %w", err)
	}
	return annotateRunInfo(filepath.Join(dir, "run.json"), recs)
}

// readShardRecords reads every shards/shard-*-of-*.json of dir, sorted
// by shard index.
func readShardRecords(dir string) ([]shardRecord, error) {
	paths, err := filepath.Glob(filepath.Join(dir, dmrifit.ShardsDir, "shard-*-of-*.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%s: no shard records (shard-I-of-N.json); run `prism dmri fit --shard I/N --out %s` first", filepath.Join(dir, dmrifit.ShardsDir), dir)
	}
	var recs []shardRecord
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r shardRecord
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if err := r.Shard.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		recs = append(recs, r)
	}
	slices.SortFunc(recs, func(a, b shardRecord) int { return a.Shard.Index - b.Shard.Index })
	return recs, nil
}

// annotateRunInfo adds the shards' records to run.json (whose timings
// are those of the merge, the fitting having happened in the shards).
func annotateRunInfo(path string, recs []shardRecord) error {
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
	return dmrifit.WriteJSON(path, info)
}
