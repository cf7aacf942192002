package dmrifit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrepareOutput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   []string
		fresh   bool
		want    string   // error substring, "" for none
		remains []string // files left afterwards
	}{
		{"new folder", nil, false, "", nil},
		{"only foreign files", []string{"notes.txt", ".prism.lock"}, false, "", []string{".prism.lock", "notes.txt"}},
		{"earlier run's maps", []string{"run.json", "ess.nii.gz", "dyads1.nii.gz", "notes.txt"}, false, "holds the output of an earlier run (3 files: dyads1.nii.gz, ess.nii.gz, run.json)", []string{"dyads1.nii.gz", "ess.nii.gz", "notes.txt", "run.json"}},
		{"earlier run's maps, --fresh", []string{"run.json", "ess.nii.gz", "merged_f1samples.nii.gz", "model_prob.json", "notes.txt"}, true, "", []string{"notes.txt"}},
		{"interrupted run continues", []string{StateFile, "run.json", "ess.nii.gz"}, false, "", []string{StateFile, "ess.nii.gz", "run.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			if tc.files != nil {
				os.MkdirAll(dir, 0o755)
			}
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := PrepareOutput(dir, tc.fresh)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			entries, _ := os.ReadDir(dir)
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			if strings.Join(got, ",") != strings.Join(tc.remains, ",") {
				t.Errorf("left %v, want %v", got, tc.remains)
			}
		})
	}
}
