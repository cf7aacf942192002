package bids

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/posterior"
)

// Settings configure a participant-level run.
type Settings struct {
	Fit       dmrifit.FitSettings
	Posterior *posterior.Posterior
	// Network names the network in records: "model:NAME" or a checkpoint path.
	Network string
	// Version is prism's version, for GeneratedBy.
	Version string
	// Log receives one line per series (nil: discarded).
	Log io.Writer
}

// Report statuses.
const (
	StatusOK      = "ok"      // fitted (now or by an earlier run)
	StatusFailed  = "failed"  // unreadable or unusable: skipped
	StatusMissing = "missing" // a participant or session asked for has no series
)

// Report is logs/<series>.json: the outcome of one series.
type Report struct {
	Series
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Key identifies the inputs, settings and network of the fit: a
	// rerun with the same key skips the series.
	Key        string              `json:"key,omitempty"`
	Family     string              `json:"family,omitempty"`
	Network    string              `json:"network,omitempty"`
	WeightsSHA string              `json:"weights_sha256,omitempty"`
	Settings   dmrifit.FitSettings `json:"settings"`
	MaskSource string              `json:"mask_source,omitempty"`
	Grid       [3]int              `json:"grid"`
	Volumes    int                 `json:"volumes"`
	// Voxels in the mask, fitted, and skipped by reason.
	VoxelsInMask  int            `json:"voxels_in_mask"`
	VoxelsFitted  int            `json:"voxels_fitted"`
	VoxelsSkipped map[string]int `json:"voxels_skipped,omitempty"`
	// MeanNFibresProb[k] is the mean over the fitted voxels of
	// P(k fibres | x), k = 0 … sticks.
	MeanNFibresProb []float64 `json:"mean_nfibres_prob,omitempty"`
	// MeanModelMass is the mean over voxels of the model list's mass
	// before renormalising (dmrifit.Result.ModelMass).
	MeanModelMass float64            `json:"mean_model_mass,omitempty"`
	Timings       map[string]float64 `json:"timings_s"`
	Warnings      []string           `json:"warnings,omitempty"`
	// Outputs are the files written, relative to the output folder.
	Outputs  []string `json:"outputs,omitempty"`
	Finished string   `json:"finished"`
}

// LogsDir and QCDir are the output folder's report and thumbnail folders.
const (
	LogsDir = "logs"
	QCDir   = "qc"
)

// ReportPath is the report of the series (or participant) named stem.
func ReportPath(out, stem string) string { return filepath.Join(out, LogsDir, stem+".json") }

// ReadReport reads a report.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("bids: %w", err)
	}
	if err := atomicfile.WriteJSON(path, v); err != nil {
		return fmt.Errorf("bids: %w", err)
	}
	return nil
}

// Participant fits every series (those of Find) into out and writes a
// report per series and per problem. Series that fail are reported and
// skipped; series whose report says they were fitted with the same key
// are skipped. It returns the reports in the order of series, then
// problems; the error is only for the output folder itself (or ctx).
func Participant(ctx context.Context, root, out string, series []Series, problems []Problem, set Settings) ([]*Report, error) {
	logf := func(format string, a ...any) {
		if set.Log != nil {
			fmt.Fprintf(set.Log, format+"\n", a...)
		}
	}
	if err := WriteDatasetDescription(root, out, set.Version); err != nil {
		return nil, err
	}
	weights := dmrifit.WeightsHash(set.Posterior)
	var reports []*Report
	for i, s := range series {
		if err := ctx.Err(); err != nil {
			return reports, err
		}
		key := seriesKey(s, set.Fit, weights)
		if old, err := ReadReport(ReportPath(out, s.Stem)); err == nil && old.Status == StatusOK && old.Key == key && outputsExist(out, old.Outputs) {
			logf("bids: %d/%d %s: already fitted with these settings; skipped", i+1, len(series), s.Stem)
			reports = append(reports, old)
			continue
		}
		logf("bids: %d/%d %s: fitting", i+1, len(series), s.Stem)
		r := fitSeries(ctx, out, s, set, weights, key)
		if errors.Is(ctx.Err(), context.Canceled) {
			return reports, ctx.Err()
		}
		if r.Status == StatusOK {
			logf("bids: %d/%d %s: %d voxels in %.1f s", i+1, len(series), s.Stem, r.VoxelsFitted, r.Timings["fit"])
		} else {
			logf("bids: %d/%d %s: FAILED, skipped: %s", i+1, len(series), s.Stem, r.Error)
		}
		if err := writeJSON(ReportPath(out, s.Stem), r); err != nil {
			return reports, err
		}
		reports = append(reports, r)
	}
	for _, p := range problems {
		stem := p.Subject
		if p.Session != "" {
			stem += "_" + p.Session
		}
		logf("bids: %s: MISSING: %s", stem, p.Reason)
		r := &Report{Series: Series{Subject: p.Subject, Session: p.Session, Stem: stem}, Status: StatusMissing, Error: p.Reason,
			Timings: map[string]float64{}, Finished: time.Now().UTC().Format(time.RFC3339)}
		if err := writeJSON(ReportPath(out, stem), r); err != nil {
			return reports, err
		}
		reports = append(reports, r)
	}
	return reports, nil
}

func outputsExist(out string, files []string) bool {
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			return false
		}
	}
	return len(files) > 0
}

// seriesKey hashes the series' input files, the fit settings (without the
// batch size, which does not change the numbers) and the network.
func seriesKey(s Series, fit dmrifit.FitSettings, weights string) string {
	h := sha256.New()
	fit.BatchSize = 0
	b, _ := json.Marshal(fit)
	fmt.Fprintf(h, "%s\n%s\n", b, weights)
	for _, p := range []string{s.DWI, s.Bval, s.Bvec} {
		f, err := os.Open(p)
		if err != nil {
			fmt.Fprintf(h, "missing %s\n", p)
			continue
		}
		io.Copy(h, f)
		f.Close()
	}
	return hex.EncodeToString(h.Sum(nil))
}

// fitSeries fits one series; failures come back as a report with
// StatusFailed and no output left behind.
func fitSeries(ctx context.Context, out string, s Series, set Settings, weights, key string) *Report {
	start := time.Now()
	r := &Report{Series: s, Key: key, Family: set.Posterior.Family().Name(), Network: set.Network, WeightsSHA: weights,
		Settings: set.Fit, Timings: map[string]float64{}}
	fail := func(err error) *Report {
		r.Status, r.Error = StatusFailed, err.Error()
		r.Finished = time.Now().UTC().Format(time.RFC3339)
		return r
	}
	if m := s.Missing(); len(m) > 0 {
		return fail(fmt.Errorf("%s: missing %v", filepath.Join(s.RelDir, s.Stem+"_dwi"), m))
	}
	if s.JSON == "" {
		r.Warnings = append(r.Warnings, "no JSON sidecar "+s.Stem+"_dwi.json")
	} else if b, err := os.ReadFile(s.JSON); err != nil || !json.Valid(b) {
		r.Warnings = append(r.Warnings, "unreadable JSON sidecar "+s.JSON)
	}
	scan, err := dmrifit.LoadScan(dmrifit.ScanFiles{DWI: s.DWI, Bval: s.Bval, Bvec: s.Bvec})
	if err != nil {
		return fail(err)
	}
	r.Timings["load"] = time.Since(start).Seconds()
	r.MaskSource, r.Grid, r.Volumes = scan.MaskSource, [3]int{scan.Nx, scan.Ny, scan.Nz}, scan.Design.N
	r.VoxelsInMask, r.VoxelsFitted, r.VoxelsSkipped = scan.MaskCount(), len(scan.Voxels), scan.Skipped
	if len(scan.Voxels) == 0 {
		return fail(fmt.Errorf("%s: no voxel to fit (%d in the %s mask, all skipped)", s.DWI, scan.MaskCount(), scan.MaskSource))
	}
	if n := scan.SkippedTotal(); n > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d mask voxels skipped (%v)", n, scan.Skipped))
	}
	if scan.MaskSource != "file" {
		r.Warnings = append(r.Warnings, "brain mask computed from b0 (dmrifit.AutoMask)")
	}
	ft, err := dmrifit.NewFitter(set.Posterior, set.Fit)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", set.Network, err))
	}
	fitStart := time.Now()
	all, err := ft.Fit(ctx, scan, nil, nil)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", s.DWI, err))
	}
	r.Timings["fit"] = time.Since(fitStart).Seconds()
	r.MeanNFibresProb = make([]float64, ft.Sticks+1)
	for v := range all.N {
		for k, p := range all.NFibresProb(v, ft.Models) {
			r.MeanNFibresProb[k] += p / float64(all.N)
		}
		r.MeanModelMass += float64(all.ModelMass[v]) / float64(all.N)
	}
	if r.MeanModelMass < 0.9 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("mean model-list mass %.2f < 0.9: the network puts mass outside the prior's support (data unlike its training set?)", r.MeanModelMass))
	}

	writeStart := time.Now()
	outputs, err := writeSeries(out, s, scan, ft, all, set, weights)
	if err != nil {
		return fail(err)
	}
	r.Outputs = outputs
	r.Timings["write"] = time.Since(writeStart).Seconds()
	r.Timings["total"] = time.Since(start).Seconds()
	r.Status = StatusOK
	r.Finished = time.Now().UTC().Format(time.RFC3339)
	return r
}
