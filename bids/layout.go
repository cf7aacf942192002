// Package bids runs prism's amortized diffusion fit as a BIDS App
// (https://bids-apps.neuroimaging.io): it finds the dwi series of a BIDS
// dataset, fits each with package dmri, and writes BIDS Derivatives
// (dataset_description.json, entity-named maps with JSON sidecars), a
// BedpostX-layout folder per series for FSL tools, a report per series,
// and at the group level a cohort table (TSV) and an HTML QC page.
//
//   - Find lists the series of the dataset's participants and sessions,
//     each with its .bval, .bvec and .json (same name, or inherited from
//     the dataset root).
//   - Participant fits series one by one; a series that cannot be read
//     or fitted is reported (logs/<series>.json, status "failed") and
//     skipped, and one already fitted with the same settings, network
//     and inputs is skipped on a rerun.
//   - Group reads every report and writes group/cohort.tsv and
//     group/qc.html (thumbnails from qc/).
//
// The layout of the output folder is documented in docs/cohorts.md.
package bids

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Series is one diffusion series of a BIDS dataset.
type Series struct {
	Subject string `json:"participant_id"`       // "sub-01"
	Session string `json:"session_id,omitempty"` // "ses-1", or "" without sessions
	// Stem is the file name of the image without "_dwi.nii[.gz]", e.g.
	// "sub-01_ses-1_acq-b2500"; it names every output of the series.
	Stem string `json:"series"`
	// RelDir is the folder of the series relative to the dataset root,
	// e.g. "sub-01/ses-1/dwi"; outputs go to the same folder of OUT_DIR.
	RelDir string `json:"dir"`
	// Paths of the image and its companions; "" when not found.
	DWI  string `json:"dwi"`
	Bval string `json:"bval"`
	Bvec string `json:"bvec"`
	JSON string `json:"json"`
}

// Missing lists the companion files of s that were not found.
func (s Series) Missing() []string {
	var m []string
	for _, f := range []struct{ ext, path string }{{".bval", s.Bval}, {".bvec", s.Bvec}} {
		if f.path == "" {
			m = append(m, s.Stem+"_dwi"+f.ext)
		}
	}
	return m
}

// Problem is a participant or session that was asked for but has no
// usable series.
type Problem struct {
	Subject string `json:"participant_id"`
	Session string `json:"session_id,omitempty"`
	Reason  string `json:"reason"`
}

// Label strips a "sub-"/"ses-" prefix: BIDS Apps take labels without it,
// but users often write it.
func Label(s, prefix string) string { return strings.TrimPrefix(strings.TrimSpace(s), prefix) }

// Find lists the dwi series of the dataset at root, restricted to the
// given participant and session labels (all when empty), in the order
// of subject, session and name. Participants asked for but absent,
// participants without any dwi series, and sessions asked for
// explicitly without one are returned as problems (a session with only
// other data is not a problem when no session was asked for). root must
// hold a dataset_description.json.
func Find(root string, participants, sessions []string) ([]Series, []Problem, error) {
	if _, err := os.Stat(filepath.Join(root, "dataset_description.json")); err != nil {
		return nil, nil, fmt.Errorf("%s is not a BIDS dataset: %w", root, err)
	}
	subs, err := entityDirs(root, "sub-")
	if err != nil {
		return nil, nil, err
	}
	var want []string
	for _, p := range participants {
		want = append(want, "sub-"+Label(p, "sub-"))
	}
	var wantSes []string
	for _, s := range sessions {
		wantSes = append(wantSes, "ses-"+Label(s, "ses-"))
	}
	var problems []Problem
	for _, w := range want {
		if !slices.Contains(subs, w) {
			problems = append(problems, Problem{Subject: w, Reason: "no folder " + w + " in " + root})
		}
	}
	var out []Series
	for _, sub := range subs {
		if len(want) > 0 && !slices.Contains(want, sub) {
			continue
		}
		sess, err := entityDirs(filepath.Join(root, sub), "ses-")
		if err != nil {
			return nil, nil, err
		}
		if len(sess) == 0 {
			sess = []string{""}
		}
		found := 0
		for _, ses := range sess {
			if len(wantSes) > 0 && !slices.Contains(wantSes, ses) {
				continue
			}
			rel := filepath.Join(sub, ses, "dwi")
			ss, err := seriesIn(root, rel, sub, ses)
			if err != nil {
				return nil, nil, err
			}
			if len(ss) == 0 && ses != "" && len(wantSes) > 0 {
				problems = append(problems, Problem{Subject: sub, Session: ses, Reason: "no *_dwi.nii[.gz] in " + filepath.Join(root, rel)})
			}
			found += len(ss)
			out = append(out, ss...)
		}
		switch {
		case found > 0:
		case len(wantSes) > 0:
			if !slices.ContainsFunc(problems, func(p Problem) bool { return p.Subject == sub }) {
				problems = append(problems, Problem{Subject: sub, Reason: "none of the sessions " + strings.Join(wantSes, ", ") + " has a dwi series"})
			}
		default:
			problems = append(problems, Problem{Subject: sub, Reason: "no dwi series (*_dwi.nii[.gz]) in " + filepath.Join(root, sub)})
		}
	}
	return out, problems, nil
}

// entityDirs lists the sub-folders of dir whose names start with prefix.
func entityDirs(dir, prefix string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("bids: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// seriesIn lists the series of root/rel.
func seriesIn(root, rel, sub, ses string) ([]Series, error) {
	entries, err := os.ReadDir(filepath.Join(root, rel))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bids: %w", err)
	}
	var out []Series
	for _, e := range entries {
		name := e.Name()
		var stem string
		switch {
		case strings.HasSuffix(name, "_dwi.nii.gz"):
			stem = strings.TrimSuffix(name, "_dwi.nii.gz")
		case strings.HasSuffix(name, "_dwi.nii"):
			stem = strings.TrimSuffix(name, "_dwi.nii")
		default:
			continue
		}
		dir := filepath.Join(root, rel)
		s := Series{Subject: sub, Session: ses, Stem: stem, RelDir: rel, DWI: filepath.Join(dir, name),
			Bval: companion(root, dir, stem, ".bval"), Bvec: companion(root, dir, stem, ".bvec"), JSON: companion(root, dir, stem, ".json")}
		out = append(out, s)
	}
	return out, nil
}

// companion returns the series' file with extension ext: beside the
// image, or (BIDS inheritance) dwi<ext> at the dataset root; "" if none.
func companion(root, dir, stem, ext string) string {
	for _, p := range []string{filepath.Join(dir, stem+"_dwi"+ext), filepath.Join(root, "dwi"+ext)} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}
