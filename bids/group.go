package bids

import (
	"bufio"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prismsbi/prism/internal/atomicfile"
)

// GroupDir holds the group-level outputs.
const GroupDir = "group"

// CohortColumns are the columns of group/cohort.tsv, in order. p_nfibres_k
// is the mean over the series' fitted voxels of P(k fibres | x); times
// are in seconds; warnings are joined by "; ".
var CohortColumns = []string{"participant_id", "session_id", "series", "status", "voxels_in_mask", "voxels_fitted",
	"voxels_skipped", "p_nfibres_0", "p_nfibres_1", "p_nfibres_2", "p_nfibres_3", "mean_model_mass", "fit_s", "total_s",
	"network", "error", "warnings"}

// Group reads every report in out/logs and writes group/cohort.tsv (one
// row per series, and per participant or session asked for without a
// series) and group/qc.html (one row of thumbnails per fitted series).
// It returns the reports, sorted by participant, session and series.
func Group(out string) ([]*Report, error) {
	paths, err := filepath.Glob(filepath.Join(out, LogsDir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("bids: %w", err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("bids: %s: no reports; run the participant level first", filepath.Join(out, LogsDir))
	}
	var reports []*Report
	for _, p := range paths {
		r, err := ReadReport(p)
		if err != nil {
			return nil, fmt.Errorf("bids: %w", err)
		}
		reports = append(reports, r)
	}
	slices.SortFunc(reports, func(a, b *Report) int {
		return strings.Compare(a.Subject+"\x00"+a.Session+"\x00"+a.Stem, b.Subject+"\x00"+b.Session+"\x00"+b.Stem)
	})
	tsv := filepath.Join(out, GroupDir, "cohort.tsv")
	if err := os.MkdirAll(filepath.Dir(tsv), 0o755); err != nil {
		return nil, fmt.Errorf("bids: %w", err)
	}
	if err := atomicfile.Write(tsv, func(w *bufio.Writer) error { return WriteCohortTSV(w, reports) }); err != nil {
		return nil, fmt.Errorf("bids: %s: %w", tsv, err)
	}
	html := filepath.Join(out, GroupDir, "qc.html")
	if err := atomicfile.Write(html, func(w *bufio.Writer) error { return writeQCPage(w, reports) }); err != nil {
		return nil, fmt.Errorf("bids: %s: %w", html, err)
	}
	return reports, nil
}

// WriteCohortTSV writes the reports as the cohort table (CohortColumns;
// "n/a" for missing values, as BIDS TSV files).
func WriteCohortTSV(w io.Writer, reports []*Report) error {
	clean := func(s string) string { return strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s) }
	na := func(s string) string {
		if s == "" {
			return "n/a"
		}
		return clean(s)
	}
	num := func(x float64, ok bool) string {
		if !ok {
			return "n/a"
		}
		return strconv.FormatFloat(x, 'f', 4, 64)
	}
	if _, err := fmt.Fprintln(w, strings.Join(CohortColumns, "\t")); err != nil {
		return err
	}
	for _, r := range reports {
		ok := r.Status == StatusOK
		skipped := 0
		for _, n := range r.VoxelsSkipped {
			skipped += n
		}
		count := func(n int) string {
			if !ok {
				return "n/a"
			}
			return strconv.Itoa(n)
		}
		row := []string{r.Subject, na(r.Session), r.Stem, r.Status, count(r.VoxelsInMask), count(r.VoxelsFitted), count(skipped)}
		for k := range 4 {
			row = append(row, num(at(r.MeanNFibresProb, k), ok && k < len(r.MeanNFibresProb)))
		}
		row = append(row, num(r.MeanModelMass, ok), num(r.Timings["fit"], ok), num(r.Timings["total"], ok),
			na(r.Network), na(r.Error), na(strings.Join(r.Warnings, "; ")))
		if _, err := fmt.Fprintln(w, strings.Join(row, "\t")); err != nil {
			return err
		}
	}
	return nil
}

func at(x []float64, k int) float64 {
	if k < len(x) {
		return x[k]
	}
	return 0
}

var qcPage = template.Must(template.New("qc").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>prism cohort QC</title>
<style>
body{font-family:sans-serif;margin:1em}
table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:4px;vertical-align:top;font-size:13px}
img{image-rendering:pixelated;height:160px}
.failed,.missing{background:#fdd}
</style></head><body>
<h1>prism cohort QC</h1>
<p>{{.OK}} series fitted, {{.Failed}} failed, {{.Missing}} participants or sessions without a series.
Middle axial slice, anterior up: b0; dyads1 direction-encoded colour weighted by mean f1; expected number of fibres (viridis, 0 to the number of sticks).
The numbers are in <a href="cohort.tsv">cohort.tsv</a>.</p>
<table>
<tr><th>series</th><th>status</th><th>b0</th><th>dyads1 × f1</th><th>E[fibres]</th><th>P(0,1,2,3 fibres)</th><th>warnings</th></tr>
{{range .Rows}}<tr class="{{.Status}}"><td>{{.Stem}}</td><td>{{.Status}}{{if .Error}}<br>{{.Error}}{{end}}</td>
{{if .Thumbs}}{{range .Thumbs}}<td><img src="{{.}}" alt="{{.}}"></td>{{end}}{{else}}<td></td><td></td><td></td>{{end}}
<td>{{.NFibres}}</td><td>{{range .Warnings}}{{.}}<br>{{end}}</td></tr>
{{end}}</table></body></html>
`))

func writeQCPage(w io.Writer, reports []*Report) error {
	type row struct {
		*Report
		Thumbs  []string
		NFibres string
	}
	var data struct {
		OK, Failed, Missing int
		Rows                []row
	}
	for _, r := range reports {
		rw := row{Report: r}
		switch r.Status {
		case StatusOK:
			data.OK++
			for _, k := range thumbKinds {
				rw.Thumbs = append(rw.Thumbs, "../"+filepath.ToSlash(ThumbnailName(r.Stem, k)))
			}
			var ps []string
			for _, p := range r.MeanNFibresProb {
				ps = append(ps, strconv.FormatFloat(p, 'f', 2, 64))
			}
			rw.NFibres = strings.Join(ps, ", ")
		case StatusFailed:
			data.Failed++
		default:
			data.Missing++
		}
		data.Rows = append(data.Rows, rw)
	}
	return qcPage.Execute(w, data)
}
