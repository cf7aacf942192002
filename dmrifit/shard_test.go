package dmrifit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShardRangeTiles: for any total and count, the shards' ranges tile
// [0, total) in order and their sizes differ by at most one.
func TestShardRangeTiles(t *testing.T) {
	for _, total := range []int{0, 1, 7, 100, 48885} {
		for _, n := range []int{1, 2, 3, 4, 16, 101} {
			next, small, big := 0, total, 0
			for i := range n {
				lo, hi := Shard{Index: i, Count: n}.Range(total)
				if lo != next || hi < lo {
					t.Fatalf("total %d, shard %d/%d: [%d, %d) after %d", total, i, n, lo, hi, next)
				}
				small, big, next = min(small, hi-lo), max(big, hi-lo), hi
			}
			if next != total || big-small > 1 {
				t.Errorf("total %d, %d shards: end %d, sizes %d…%d", total, n, next, small, big)
			}
		}
	}
}

func TestParseShard(t *testing.T) {
	if sh, err := ParseShard("3/4"); err != nil || sh != (Shard{3, 4}) {
		t.Errorf("3/4: %v, %v", sh, err)
	}
	for _, bad := range []string{"4/4", "-1/4", "1", "a/b", "0/0", "1/"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestShardFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, c := range []struct {
		get   func(string) string
		count int
		want  Shard
		err   string
	}{
		{env("SLURM_ARRAY_TASK_ID", "2", "SLURM_ARRAY_TASK_COUNT", "4"), 0, Shard{2, 4}, ""},
		{env("SLURM_ARRAY_TASK_ID", "4", "SLURM_ARRAY_TASK_MIN", "1", "SLURM_ARRAY_TASK_COUNT", "4"), 0, Shard{3, 4}, ""},
		{env("SLURM_ARRAY_TASK_ID", "4", "SLURM_ARRAY_TASK_COUNT", "4"), 0, Shard{}, "0 ≤ I < N"},
		{env("SLURM_ARRAY_TASK_ID", "1", "SLURM_ARRAY_TASK_COUNT", "4"), 3, Shard{}, "SLURM_ARRAY_TASK_COUNT=4"},
		{env("SLURM_ARRAY_TASK_ID", "x"), 2, Shard{}, "not an integer"},
		{env("JOB_COMPLETION_INDEX", "5"), 8, Shard{5, 8}, ""},
		{env("JOB_COMPLETION_INDEX", "5"), 0, Shard{}, "number of shards"},
		{env(), 4, Shard{}, "neither"},
	} {
		sh, err := ShardFromEnv(c.get, c.count)
		switch {
		case c.err == "" && (err != nil || sh != c.want):
			t.Errorf("want %v, got %v, %v", c.want, sh, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("want an error with %q, got %v, %v", c.err, sh, err)
		}
	}
}

// TestMergeShardsReportsMissing: a merge with parts missing fails naming
// the shards that never started and those that are unfinished, and
// writes no state.
func TestMergeShardsReportsMissing(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ShardsDir), 0o755)
	os.WriteFile(Shard{1, 3}.StatePath(dir), []byte(stateMagicLine+"k\n"), 0o644)
	os.WriteFile(Shard{2, 3}.PartPath(dir), []byte(stateMagicLine+"k\n"), 0o644)
	state := filepath.Join(dir, StateFile)
	err := MergeShards(dir, state, []byte("k"), ResultShape{Samples: 1, Models: 1, Sticks: 1}, 10, 3)
	if err == nil || !strings.Contains(err.Error(), "shard 0/3 not started") || !strings.Contains(err.Error(), "shard 1/3 unfinished") || strings.Contains(err.Error(), "2/3") {
		t.Errorf("error %v", err)
	}
	if _, err := os.Stat(state); err == nil {
		t.Error("a state was written")
	}
}

// TestReadShardPartRefuses a part of another fit and a truncated one.
func TestReadShardPartRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.part")
	os.WriteFile(path, []byte(stateMagicLine+"key\n"), 0o644)
	sh := ResultShape{Samples: 1, Models: 1, Sticks: 1}
	if _, err := ReadShardPart(path, []byte("other"), sh, 4); err == nil || !strings.Contains(err.Error(), "another fit") {
		t.Errorf("other key: %v", err)
	}
	if _, err := ReadShardPart(path, []byte("key"), sh, 4); err == nil || !strings.Contains(err.Error(), "0 of 4 voxels") {
		t.Errorf("empty part: %v", err)
	}
}
