package eval

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/plot"
)

// Row is one line of summary.csv: a metric, its value and the setting it
// was computed in (e.g. "lambda=random", "lambda=0.3").
type Row struct {
	Metric  string
	Value   float64
	Setting string
}

// Rows flattens the report into long format. Every figure with a Monte
// Carlo uncertainty gets a second row named "<metric>_se".
func (rep *Report) Rows() []Row {
	set := "lambda=" + rep.Lambda
	var rows []Row
	add := func(name string, v float64, setting string) {
		rows = append(rows, Row{name, v, setting})
	}
	val := func(name string, v Value, setting string) {
		add(name, v.Value, setting)
		add(name+"_se", v.SE, setting)
	}
	cal := func(prefix string, c Calibration) {
		val(prefix+"_ce", c.CE, set)
		add(prefix+"_ce_band_mean", c.Band.Mean, set)
		add(prefix+"_ce_band_upper", c.Band.Upper, set)
		if c.DependentBand != nil {
			add(prefix+"_ce_dependent_band_upper", c.DependentBand.Upper, set)
		}
	}
	cal("mask_sbc", rep.Mask)
	cal("param_sbc", rep.Param)
	for _, d := range rep.Param.ByDimension {
		s := set + ",param=" + d.Name
		val("param_sbc_dim_ce", d.CE, s)
		add("param_sbc_dim_ce_band_upper", d.BandUpper, s)
		add("param_sbc_dim_values", float64(d.Values), s)
		val("param_sbc_dim_mean_pit", d.MeanPIT, s)
	}
	// binSetting names a posterior-width bin in a setting.
	binSetting := func(setting string, w WidthCalibration) string {
		hi := "inf"
		if w.SDHi != nil {
			hi = fmt.Sprint(*w.SDHi)
		}
		return fmt.Sprintf("%s,sd=%g-%s", setting, w.SDLo, hi)
	}
	for _, w := range rep.Param.ByWidth {
		s := binSetting(set, w)
		val("param_sbc_width_ce", w.CE, s)
		add("param_sbc_width_ce_band_upper", w.BandUpper, s)
		add("param_sbc_width_values", float64(w.Values), s)
		val("param_sbc_width_central_half", w.Central, s)
		add("param_sbc_width_central_half_expected", w.CentralExpected, s)
		val("param_sbc_width_mean_pit", w.MeanPIT, s)
	}
	if c := rep.ParamCorrected; c != nil {
		cs := set + ",correct=" + c.Method
		val("param_sbc_corrected_ce", c.CE, cs)
		add("param_sbc_corrected_ce_band_upper", c.Band.Upper, cs)
		add("param_sbc_corrected_ce_dependent_band_upper", c.DependentBand.Upper, cs)
		add("param_sbc_corrected_observations", float64(c.Observations), cs)
		add("param_sbc_corrected_failed", float64(c.Failed), cs)
		val("param_sbc_corrected_mean_ess", c.ESS, cs)
		if c.Passed != nil {
			val("param_sbc_corrected_passed_ce", c.Passed.CE, cs)
			add("param_sbc_corrected_passed_ce_band_upper", c.Passed.Band.Upper, cs)
			add("param_sbc_corrected_passed_ce_dependent_band_upper", c.Passed.DependentBand.Upper, cs)
		}
		for _, w := range c.ByWidth {
			s := binSetting(cs, w)
			val("param_sbc_corrected_width_central_half", w.Central, s)
			val("param_sbc_corrected_width_mean_pit", w.MeanPIT, s)
		}
	}
	if k := rep.KSD; k != nil {
		val("ksd", k.KSD, set)
		val("ksd_prior", k.KSDPrior, set)
		val("rksd", k.RKSD, set)
		add("rksd_median", float64(k.RKSDMed), set)
	}
	if e := rep.Exact; e != nil {
		val("tv_exact", e.TV, set)
		add("tv_exact_median", float64(e.TVMedian), set)
		add("tv_exact_max", float64(e.TVMax), set)
	}
	if e := rep.Evidence; e != nil {
		val("ess", e.ESS, set)
		add("ess_median", float64(e.ESSMedian), set)
		add("log_evidence_se", float64(e.LogEvidenceSE), set)
		val("evidence_r2_two_sets", e.R2Sets, set)
		val("evidence_r2_proxy", e.R2Proxy, set)
		if e.R2Exact != nil {
			val("evidence_r2_exact", *e.R2Exact, set)
		}
		for _, t := range e.TV {
			s := "lambda=" + strconv.FormatFloat(t.Lambda, 'g', -1, 64)
			val("tv_is_subset", t.IS, s)
			if t.Exact != nil {
				val("tv_exact", *t.Exact, s)
			}
		}
	}
	if p := rep.Predictive; p != nil {
		val("rmse_local", p.Local, set)
		val("rmse_global", p.Global, set)
		val("rmse_min", p.Floor, set)
		val("rrmse_local", p.RelLocal, set)
		val("rrmse_global", p.RelGlobal, set)
	}
	if c := rep.Class; c != nil {
		s := fmt.Sprintf("%s,models=%d", set, c.Models)
		val("top1", c.Top1, s)
		val("top5", c.Top5, s)
		val("macro_precision", c.Precision, s)
		val("macro_recall", c.Recall, s)
		val("macro_f1", c.F1, s)
		if c.BayesTop1 != nil {
			val("bayes_top1", *c.BayesTop1, s)
			val("bayes_top5", *c.BayesTop5, s)
		}
	}
	return append(rows, rep.Selection.rows(set)...)
}

// WriteDir writes report.json, summary.csv and the figures
// calibration.png, confusion.png, rksd.png and ess.png into dir (created
// if needed). Every file is written atomically: a temporary file in dir is
// renamed over the target only when complete.
func (rep *Report) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, "report.json"), func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}); err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, "summary.csv"), func(w io.Writer) error {
		if _, err := fmt.Fprintln(w, "metric,value,setting"); err != nil {
			return err
		}
		for _, r := range rep.Rows() {
			if _, err := fmt.Fprintf(w, "%s,%s,%q\n", r.Metric, strconv.FormatFloat(r.Value, 'g', 6, 64), r.Setting); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return rep.plots(dir)
}

func (rep *Report) plots(dir string) error {
	// Calibration: one figure per kind so that each band matches its N.
	// Parameter PIT values are discrete, on the S + 1 levels of S samples:
	// their ECDF is drawn through the level boundaries (plot.Levels).
	type figure struct {
		name, title string
		cal         Calibration
		levels      int
	}
	figs := []figure{
		{"calibration-masks.png", "model SBC (randomised ranks of log q)", rep.Mask, 0},
		{"calibration-params.png", "parameter SBC (PIT, active dimensions)", rep.Param, rep.Settings.ThetaSamples + 1},
	}
	if c := rep.ParamCorrected; c != nil {
		figs = append(figs, figure{"calibration-params-corrected.png", fmt.Sprintf("parameter SBC, %s-corrected", c.Method), c.Calibration, rep.Settings.ThetaSamples + 1})
	}
	for _, c := range figs {
		band := c.cal.Band
		if c.cal.DependentBand != nil {
			band = *c.cal.DependentBand
		}
		o := plot.CalibrationOptions{
			Options: plot.Options{Title: fmt.Sprintf("%s: CE %.4f, %.0f%% band ≤ %.4f", c.title, c.cal.CE.Value, 100*band.Level, band.Upper), XLabel: "u"},
			Level:   band.Level,
			Band:    &plot.ECDFBand{Z: band.Z, Lo: band.Lo, Hi: band.Hi},
			Levels:  c.levels,
		}
		if err := plot.CalibrationECDF(filepath.Join(dir, c.name), []plot.Series{{Name: fmt.Sprintf("%d values", len(c.cal.U)), Values: c.cal.U}}, o); err != nil {
			return fmt.Errorf("eval: %w", err)
		}
	}
	if c := rep.Class; c != nil {
		rows := make([][]float64, len(c.Matrix))
		for i, row := range c.Matrix {
			s := 0.0
			for _, v := range row {
				s += v
			}
			rows[i] = make([]float64, len(row))
			for j, v := range row {
				if s > 0 {
					rows[i][j] = v / s
				}
			}
		}
		o := plot.Options{Title: fmt.Sprintf("confusion (row-normalised), top-1 %.3f", c.Top1.Value), XLabel: "predicted model", YLabel: "true model"}
		if err := plot.ConfusionMatrix(filepath.Join(dir, "confusion.png"), rows, c.Labels, c.Labels, o); err != nil {
			return fmt.Errorf("eval: %w", err)
		}
	}
	if err := rep.Selection.plot(filepath.Join(dir, "selection_confusion.png")); err != nil {
		return err
	}
	if k := rep.KSD; k != nil && len(k.PerObs) > 0 {
		o := plot.HistogramOptions{Options: plot.Options{Title: fmt.Sprintf("rKSD per observation (median %.3f)", float64(k.RKSDMed)), XLabel: "rKSD", YLabel: "count"}}
		if err := plot.Histogram(filepath.Join(dir, "rksd.png"), []plot.Series{{Name: "rKSD", Values: k.PerObs}}, o); err != nil {
			return fmt.Errorf("eval: %w", err)
		}
	}
	if e := rep.Evidence; e != nil && len(e.PerObs) > 0 {
		o := plot.HistogramOptions{Options: plot.Options{Title: fmt.Sprintf("normalised ESS under the true model (median %.3f)", float64(e.ESSMedian)), XLabel: "ESS", YLabel: "count"}}
		if err := plot.Histogram(filepath.Join(dir, "ess.png"), []plot.Series{{Name: "ESS", Values: e.PerObs}}, o); err != nil {
			return fmt.Errorf("eval: %w", err)
		}
	}
	return nil
}

// MarshalJSON writes a non-finite value or standard error as null.
func (v Value) MarshalJSON() ([]byte, error) {
	return []byte(`{"value":` + jsonNum(v.Value) + `,"se":` + jsonNum(v.SE) + `}`), nil
}

// MarshalJSON writes a non-finite number as null.
func (x Number) MarshalJSON() ([]byte, error) { return []byte(jsonNum(float64(x))), nil }

// Number is a float64 that encodes non-finite values as JSON null.
type Number float64

func jsonNum(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "null"
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// writeAtomic writes path through internal/atomicfile (a synced temporary
// file renamed over it, mode 0644).
func writeAtomic(path string, write func(io.Writer) error) error {
	if err := atomicfile.Write(path, func(w *bufio.Writer) error { return write(w) }); err != nil {
		return fmt.Errorf("eval: writing %s: %w", path, err)
	}
	return nil
}
