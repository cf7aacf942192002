package dmrifit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Sharding splits the fit of one scan into N deterministic parts that run
// as separate processes (a SLURM job array, a Kubernetes Indexed Job) and
// are joined afterwards into exactly the folder an unsharded fit writes.
//
// Shard I of N fits the voxels at positions [⌊T·I/N⌋, ⌊T·(I+1)/N⌋) of
// Scan.Voxels (T voxels in all). Every voxel's random numbers depend only
// on the seed and its position (FitBatch), so the union of the parts is
// bit for bit the unsharded fit. A running shard keeps its finished
// batches in ShardsDir/shard-I-of-N.state (a FitState whose records are
// numbered from the shard's first voxel); when it completes, the file is
// renamed to shard-I-of-N.part. MergeShards turns the N parts into the
// FitState of the whole scan, which the unsharded fit then finds
// complete and writes out.

// ShardsDir is the folder, inside a fit's output folder, that holds the
// shards' partial states, finished parts and records.
const ShardsDir = "shards"

// Shard is part Index of Count (0 ≤ Index < Count).
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// ParseShard parses "I/N" (0-based I, 0 ≤ I < N).
func ParseShard(s string) (Shard, error) {
	i, n, ok := strings.Cut(s, "/")
	if !ok {
		return Shard{}, fmt.Errorf("shard %q: want I/N, e.g. 0/4, or auto", s)
	}
	idx, err1 := strconv.Atoi(strings.TrimSpace(i))
	cnt, err2 := strconv.Atoi(strings.TrimSpace(n))
	if err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("shard %q: want two integers I/N", s)
	}
	sh := Shard{Index: idx, Count: cnt}
	return sh, sh.Validate()
}

// Validate checks 0 ≤ Index < Count.
func (sh Shard) Validate() error {
	if sh.Count < 1 || sh.Index < 0 || sh.Index >= sh.Count {
		return fmt.Errorf("shard %d/%d: want 0 ≤ I < N", sh.Index, sh.Count)
	}
	return nil
}

// String returns "I/N".
func (sh Shard) String() string { return fmt.Sprintf("%d/%d", sh.Index, sh.Count) }

// ShardFromEnv returns the shard of this process from a scheduler's
// environment (getenv is os.Getenv in a real run):
//
//   - SLURM job arrays: I = SLURM_ARRAY_TASK_ID − SLURM_ARRAY_TASK_MIN
//     (MIN taken as 0 when unset) and N = SLURM_ARRAY_TASK_COUNT, so
//     that --array=0-3 and --array=1-4 both give shards 0 … 3 of 4;
//   - Kubernetes Indexed Jobs: I = JOB_COMPLETION_INDEX, and N = count,
//     which the caller takes from a flag (Kubernetes does not export the
//     completion count).
//
// count, when positive, must agree with SLURM's N.
func ShardFromEnv(getenv func(string) string, count int) (Shard, error) {
	atoi := func(name string) (int, error) {
		v, err := strconv.Atoi(strings.TrimSpace(getenv(name)))
		if err != nil {
			return 0, fmt.Errorf("shard auto: %s=%q is not an integer", name, getenv(name))
		}
		return v, nil
	}
	if getenv("SLURM_ARRAY_TASK_ID") != "" {
		id, err := atoi("SLURM_ARRAY_TASK_ID")
		if err != nil {
			return Shard{}, err
		}
		lo := 0
		if getenv("SLURM_ARRAY_TASK_MIN") != "" {
			if lo, err = atoi("SLURM_ARRAY_TASK_MIN"); err != nil {
				return Shard{}, err
			}
		}
		n := count
		if getenv("SLURM_ARRAY_TASK_COUNT") != "" {
			if n, err = atoi("SLURM_ARRAY_TASK_COUNT"); err != nil {
				return Shard{}, err
			}
			if count > 0 && count != n {
				return Shard{}, fmt.Errorf("shard auto: SLURM_ARRAY_TASK_COUNT=%d but %d shards were asked for", n, count)
			}
		}
		if n < 1 {
			return Shard{}, errors.New("shard auto: SLURM_ARRAY_TASK_ID is set but not SLURM_ARRAY_TASK_COUNT; give the number of shards")
		}
		sh := Shard{Index: id - lo, Count: n}
		if err := sh.Validate(); err != nil {
			return Shard{}, fmt.Errorf("shard auto (SLURM_ARRAY_TASK_ID=%d, MIN=%d): %w", id, lo, err)
		}
		return sh, nil
	}
	if getenv("JOB_COMPLETION_INDEX") != "" {
		id, err := atoi("JOB_COMPLETION_INDEX")
		if err != nil {
			return Shard{}, err
		}
		if count < 1 {
			return Shard{}, errors.New("shard auto: JOB_COMPLETION_INDEX is set; give the number of shards (the Job's completions)")
		}
		sh := Shard{Index: id, Count: count}
		if err := sh.Validate(); err != nil {
			return Shard{}, fmt.Errorf("shard auto (JOB_COMPLETION_INDEX=%d): %w", id, err)
		}
		return sh, nil
	}
	return Shard{}, errors.New("shard auto: neither SLURM_ARRAY_TASK_ID (SLURM job array) nor JOB_COMPLETION_INDEX (Kubernetes Indexed Job) is set")
}

// Range returns the positions [lo, hi) in Scan.Voxels of the shard's
// voxels among total. Consecutive shards tile [0, total) and their sizes
// differ by at most one voxel.
func (sh Shard) Range(total int) (lo, hi int) {
	return total * sh.Index / sh.Count, total * (sh.Index + 1) / sh.Count
}

func (sh Shard) base() string { return fmt.Sprintf("shard-%d-of-%d", sh.Index, sh.Count) }

// StatePath, PartPath and RecordPath are the shard's partial state,
// finished part and JSON record inside a fit's output folder dir.
func (sh Shard) StatePath(dir string) string {
	return filepath.Join(dir, ShardsDir, sh.base()+".state")
}

// PartPath is the shard's finished part (see StatePath).
func (sh Shard) PartPath(dir string) string { return filepath.Join(dir, ShardsDir, sh.base()+".part") }

// RecordPath is the shard's JSON record (see StatePath).
func (sh Shard) RecordPath(dir string) string {
	return filepath.Join(dir, ShardsDir, sh.base()+".json")
}

// Key returns the state key of the shard of a fit whose whole-scan key
// is fitKey (one line): the fit key followed by the shard and its range.
func (sh Shard) Key(fitKey []byte, total int) []byte {
	lo, hi := sh.Range(total)
	return fmt.Appendf(bytes.TrimSpace(append([]byte(nil), fitKey...)), " shard %d/%d voxels [%d,%d)", sh.Index, sh.Count, lo, hi)
}

// FitShard fits the shard's voxels of s in batches, appending each to st
// (whose records count from the shard's first voxel; batches already in
// st are kept) until the shard is complete. progress, if not nil, gets
// the number of the shard's voxels done. A cancelled ctx stops after the
// current batch with ctx.Err().
func (ft *Fitter) FitShard(ctx context.Context, s *Scan, sh Shard, st *FitState, progress func(done int)) error {
	if err := sh.Validate(); err != nil {
		return fmt.Errorf("dmri: %w", err)
	}
	lo, hi := sh.Range(len(s.Voxels))
	n := hi - lo
	if st.Done() > n {
		return fmt.Errorf("dmri: the partial state of shard %v covers %d voxels, the shard has %d", sh, st.Done(), n)
	}
	st.Batches = nil
	if progress != nil {
		progress(st.Done())
	}
	for st.Done() < n {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := min(ft.set.BatchSize, n-st.Done())
		b, err := ft.FitBatch(s, lo+st.Done(), k)
		if err != nil {
			return err
		}
		b.Start = st.Done() // records are numbered within the shard
		if err := st.Append(b); err != nil {
			return err
		}
		if progress != nil {
			progress(st.Done())
		}
	}
	return nil
}

// CompleteShard closes st (which must cover all n voxels of the shard)
// and renames it to the shard's part file.
func CompleteShard(st *FitState, part string, n int) error {
	if st.Done() != n {
		return fmt.Errorf("dmri: shard state %s covers %d of %d voxels", st.path, st.Done(), n)
	}
	if err := st.f.Close(); err != nil {
		return fmt.Errorf("dmri: %s: %w", st.path, err)
	}
	if err := os.Rename(st.path, part); err != nil {
		return fmt.Errorf("dmri: %w", err)
	}
	return syncDir(filepath.Dir(part))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("dmri: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("dmri: sync %s: %w", dir, err)
	}
	return nil
}

// ReadShardPart reads a finished part: it must start with the shard's key
// and hold exactly the shard's voxels in complete records.
func ReadShardPart(path string, key []byte, shape ResultShape, n int) ([]*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("dmri: %w", err)
	}
	head := []byte(stateMagicLine + string(bytes.TrimSpace(key)) + "\n")
	if !bytes.HasPrefix(data, head) {
		return nil, fmt.Errorf("dmri: %s belongs to another fit (settings, network, scan or shard differ); rerun the shard", path)
	}
	st := &FitState{recordFile: &recordFile{path: path}}
	used := st.decode(data[len(head):], st.codec(shape))
	if st.Done() != n || len(head)+used != len(data) {
		return nil, fmt.Errorf("dmri: %s: damaged part: %d of %d voxels in complete records, %d trailing bytes; rerun the shard", path, st.Done(), n, len(data)-len(head)-used)
	}
	return st.Batches, nil
}

// MergeShards writes the whole-scan FitState at statePath (key fitKey)
// from the count finished parts in dir/ShardsDir of a scan of total
// voxels, shard by shard. It reports every missing or damaged part.
func MergeShards(dir, statePath string, fitKey []byte, shape ResultShape, total, count int) error {
	var problems []string
	for i := range count {
		sh := Shard{Index: i, Count: count}
		if _, err := os.Stat(sh.PartPath(dir)); err != nil {
			what := "not started"
			if _, err := os.Stat(sh.StatePath(dir)); err == nil {
				what = "unfinished (" + filepath.Base(sh.StatePath(dir)) + " exists: rerun it to continue)"
			}
			problems = append(problems, fmt.Sprintf("shard %v %s", sh, what))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("dmri: cannot merge %s: %s", filepath.Join(dir, ShardsDir), strings.Join(problems, "; "))
	}
	st, err := OpenFitState(statePath, fitKey, shape, true)
	if err != nil {
		return err
	}
	for i := range count {
		sh := Shard{Index: i, Count: count}
		lo, hi := sh.Range(total)
		batches, err := ReadShardPart(sh.PartPath(dir), sh.Key(fitKey, total), shape, hi-lo)
		if err != nil {
			st.Remove()
			return err
		}
		for _, b := range batches {
			b.Start += lo
			if err := st.Append(b); err != nil {
				st.Remove()
				return err
			}
		}
	}
	return st.Close()
}
