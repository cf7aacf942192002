package main

import (
	"fmt"
	"io"
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
	recs, err := dmrifit.PrepareMerge(dir)
	if err != nil {
		return err
	}
	first := recs[0]
	fmt.Fprintf(stderr, "dmri merge: %d shards, %d voxels; writing %s\n", first.Shard.Count, first.TotalVoxels, dir)
	fitArgs := append(slices.Clone(first.FitArgs), "--out", dir, "--quiet")
	if err := runDMRIFit(fitArgs, stdout, stderr); err != nil {
		return fmt.Errorf("dmri merge: %w", err)
	}
	return dmrifit.AnnotateMerge(filepath.Join(dir, "run.json"), recs)
}
