package dmrifit

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// outputPrefixes are the names (without OutputExt) of the maps WriteBedpostX
// and WriteFit write, up to the stick number.
var outputPrefixes = []string{"merged_", "mean_", "dyads", "nodif_brain_mask", "model_prob", "nfibres_prob", "map_model", "ess", "pp_rmse", "peaks",
	"comp_prob", "class_prob", "map_prob", "model_mass", "pred_signal"}

// OutputFiles lists the files in dir that a fit writes (maps, model_prob.json,
// run.json), sorted; other files are not listed.
func OutputFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dmri: %w", err)
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() {
			continue
		}
		owned := n == "run.json" || n == "model_prob.json" || n == "selection.json"
		if base, ok := strings.CutSuffix(n, OutputExt); ok {
			for _, p := range outputPrefixes {
				owned = owned || strings.HasPrefix(base, p)
			}
		}
		if owned {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// PrepareOutput makes dir ready for a new fit. A folder holding the output
// of an earlier run (OutputFiles) is an error unless fresh, in which case
// those files are removed, so that no map of the earlier run (an ess map
// of a run with other settings) survives next to the new ones. A folder
// whose fit was interrupted (it holds StateFile) is left alone: the run
// continues, and the folder had no earlier output when it started.
func PrepareOutput(dir string, fresh bool) error {
	if _, err := os.Stat(filepath.Join(dir, StateFile)); err == nil && !fresh {
		return nil
	}
	old, err := OutputFiles(dir)
	if err != nil || len(old) == 0 {
		return err
	}
	if !fresh {
		shown := old
		if len(shown) > 4 {
			shown = append(shown[:4:4], "…")
		}
		return fmt.Errorf("dmri: %s holds the output of an earlier run (%d files: %s); pass --fresh to replace it, or choose another output folder", dir, len(old), strings.Join(shown, ", "))
	}
	for _, n := range old {
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			return fmt.Errorf("dmri: removing the earlier run's %s: %w", n, err)
		}
	}
	return nil
}
