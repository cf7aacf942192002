package bids

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/internal/atomicfile"
)

// BIDSVersion is the BIDS version of the derivatives written.
const BIDSVersion = "1.9.0"

// ModelLabel is the model entity of every map: model-prism.
const ModelLabel = "prism"

// derivMap is one BIDS map copied from the BedpostX-layout folder.
type derivMap struct {
	src, param, desc string
	optional         bool // absent for families with fewer sticks
}

var derivMaps = []derivMap{
	{src: "nfibres_prob", param: "nfibresprob", desc: "posterior probability of k fibres (sticks), volume k = 0, 1, …"},
	{src: "model_prob", param: "modelprob", desc: "posterior probability q(M | x, λ) of each model; volume k is models[k] of ModelList"},
	{src: "map_model", param: "mapmodel", desc: "1-based index of the most probable model in ModelList (0 outside the fitted voxels)"},
	{src: "dyads1", param: "dyads1", desc: "principal direction of the first (largest-fraction) stick, FSL b-vector convention (as BedpostX)"},
	{src: "dyads2", param: "dyads2", desc: "principal direction of the second stick, FSL b-vector convention", optional: true},
	{src: "mean_f1samples", param: "f1", desc: "posterior mean volume fraction of the first stick"},
	{src: "mean_f2samples", param: "f2", desc: "posterior mean volume fraction of the second stick", optional: true},
	{src: "mean_dsamples", param: "d", desc: "posterior mean diffusivity d (mm²/s)"},
	{src: "peaks", param: "peaks", desc: "MRtrix-style peaks: per stick, the dyad in world coordinates scaled by its mean fraction"},
	{src: "pp_rmse", param: "pprmse", desc: "posterior-predictive RMSE of the b0-normalised signal"},
}

// MapName returns the BIDS file name of a map of the series: entities of
// the input, then space-dwi, model-prism, param-<param>, suffix dwimap.
func MapName(stem, param string) string {
	return fmt.Sprintf("%s_space-dwi_model-%s_param-%s_dwimap.nii.gz", stem, ModelLabel, param)
}

// MaskName returns the BIDS file name of the series' brain mask.
func MaskName(stem string) string { return stem + "_space-dwi_desc-brain_mask.nii.gz" }

// BedpostXDir returns the BedpostX-layout folder of the series, relative
// to the output folder.
func BedpostXDir(s Series) string { return filepath.Join(s.RelDir, s.Stem+".bedpostX") }

// WriteDatasetDescription writes out/dataset_description.json (BIDS
// Derivatives, GeneratedBy prism) and out/.bidsignore for the folders
// that are not BIDS (logs, qc, group, *.bedpostX).
func WriteDatasetDescription(root, out, version string) error {
	abs, err := filepath.Abs(root)
	if err != nil {
		return fmt.Errorf("bids: %w", err)
	}
	desc := map[string]any{
		"Name":        "prism amortized ball-and-sticks posterior maps",
		"BIDSVersion": BIDSVersion,
		"DatasetType": "derivative",
		"GeneratedBy": []map[string]any{{
			"Name":        "prism",
			"Version":     version,
			"Description": "PRISM amortized simulation-based inference: joint posterior over the ball-and-sticks model (number of fibres) and its parameters",
			"CodeURL":     "https://github.com/prismsbi/prism",
		}},
		"SourceDatasets": []map[string]string{{"URL": "file://" + filepath.ToSlash(abs)}},
	}
	if err := writeJSON(filepath.Join(out, "dataset_description.json"), desc); err != nil {
		return err
	}
	ignore := strings.Join([]string{LogsDir + "/", QCDir + "/", GroupDir + "/", "*.bedpostX/"}, "\n") + "\n"
	if err := atomicfile.WriteBytes(filepath.Join(out, ".bidsignore"), []byte(ignore)); err != nil {
		return fmt.Errorf("bids: %s: %w", filepath.Join(out, ".bidsignore"), err)
	}
	return nil
}

// writeSeries writes the BedpostX-layout folder (through a temporary
// folder renamed into place), the BIDS maps with their sidecars and the
// QC thumbnails of a fitted series, and returns the files written,
// relative to out.
func writeSeries(out string, s Series, scan *dmrifit.Scan, ft *dmrifit.Fitter, all *dmrifit.Result, set Settings, weights string) ([]string, error) {
	dir := filepath.Join(out, s.RelDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bids: %w", err)
	}
	bpx := filepath.Join(out, BedpostXDir(s))
	tmp := filepath.Join(dir, "."+s.Stem+".bedpostX.tmp")
	os.RemoveAll(tmp)
	if err := ft.WriteFit(tmp, scan, all); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("bids: %s: %w", bpx, err)
	}
	if err := os.RemoveAll(bpx); err != nil {
		return nil, fmt.Errorf("bids: %w", err)
	}
	if err := os.Rename(tmp, bpx); err != nil {
		return nil, fmt.Errorf("bids: %w", err)
	}
	outputs := []string{filepath.Join(BedpostXDir(s), "dyads1"+dmrifit.OutputExt)}

	source := "bids:raw:" + filepath.ToSlash(filepath.Join(s.RelDir, filepath.Base(s.DWI)))
	sidecar := func(desc string) map[string]any {
		return map[string]any{
			"Description": desc,
			"Sources":     []string{source},
			"Model": map[string]any{
				"Family":         set.Posterior.Family().Name(),
				"Network":        set.Network,
				"WeightsSHA256":  weights,
				"Lambda":         set.Fit.Lambda,
				"Samples":        set.Fit.Samples,
				"ODESteps":       set.Fit.Steps,
				"ODESolver":      set.Fit.Solver,
				"Seed":           set.Fit.Seed,
				"ImportanceESS":  set.Fit.ESSSamples,
				"Models":         ft.Models,
				"DirectionFrame": "FSL b-vector convention (dyads); world coordinates (peaks)",
			},
			"GeneratedBy": "prism " + set.Version,
		}
	}
	put := func(src, name, desc string) error {
		b, err := os.ReadFile(filepath.Join(bpx, src+dmrifit.OutputExt))
		if err != nil {
			return fmt.Errorf("bids: %w", err)
		}
		dst := filepath.Join(dir, name)
		if err := atomicfile.WriteBytes(dst, b); err != nil {
			return fmt.Errorf("bids: %s: %w", dst, err)
		}
		js := strings.TrimSuffix(dst, ".nii.gz") + ".json"
		if err := writeJSON(js, sidecar(desc)); err != nil {
			return err
		}
		rel := filepath.Join(s.RelDir, name)
		outputs = append(outputs, rel, strings.TrimSuffix(rel, ".nii.gz")+".json")
		return nil
	}
	for _, m := range derivMaps {
		if _, err := os.Stat(filepath.Join(bpx, m.src+dmrifit.OutputExt)); err != nil && m.optional {
			continue
		}
		if err := put(m.src, MapName(s.Stem, m.param), m.desc); err != nil {
			return nil, err
		}
	}
	if err := put("nodif_brain_mask", MaskName(s.Stem), "brain mask of the fit (from the dataset's mask or computed from b0)"); err != nil {
		return nil, err
	}
	thumbs, err := writeThumbnails(out, s, scan, bpx)
	if err != nil {
		return nil, err
	}
	return append(outputs, thumbs...), nil
}
