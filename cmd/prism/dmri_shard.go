package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/prismsbi/prism/dmrifit"
)

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
