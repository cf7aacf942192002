package demo

import (
	"bytes"
	"fmt"
	"html/template"

	"github.com/prismsbi/prism/internal/atomicfile"
)

// ImageCheckID is the id of the report element that a script fills, once
// the page has loaded, with how many of its images decoded: attributes
// data-loaded and data-total (headless-browser tests read them from the
// DOM), and a visible sentence.
const ImageCheckID = "image-check"

// reportTemplate is index.html. Image paths are relative, so the folder
// can be moved or served as is.
var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct":  func(v float64) string { return fmt.Sprintf("%.1f %%", 100*v) },
	"f1":   func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"g3":   func(v float64) string { return fmt.Sprintf("%.3g", v) },
	"sub1": func(v int) int { return v - 1 },
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12]
		}
		return s
	},
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>prism demo</title>
<style>
body { font-family: sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.4; }
figure { display: inline-block; vertical-align: top; margin: 0.5em 1em 1.5em 0; max-width: 520px; }
figure.wide { display: block; max-width: 100%; margin-right: 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #444; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em 0; font-size: 0.9em; }
td, th { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; overflow-wrap: anywhere; }
code { background: #f4f4f4; padding: 0 0.2em; }
#` + ImageCheckID + ` { color: #666; font-size: 0.9em; }
</style>
</head>
<body>
<h1>prism demo</h1>
<p>Two shipped PRISM networks applied to the example data bundled with prism: the
<code>{{.S.DMRI.Model}}</code> ball-and-sticks network fitted voxel by voxel to a real
diffusion MRI scan, and the <code>{{.S.Symbolic.Model}}</code> symbolic-regression network's model
posterior across the complexity knob λ. All numbers and maps are in this folder
(<code>summary.json</code>, <code>dmri/</code>, <code>symbolic/</code>).</p>
<p id="` + ImageCheckID + `" data-loaded="-1" data-total="{{.Images}}">(figure check runs after the page loads)</p>

<h2>1. Diffusion MRI: amortized ball-and-sticks fit</h2>
<p>Scan: <code>data/xa30-prisma-b2500-wholebrain</code>, {{index .S.DMRI.Grid 0}}×{{index .S.DMRI.Grid 1}}×{{index .S.DMRI.Grid 2}} voxels,
{{.S.DMRI.Volumes}} volumes (b = 0 and 20 directions at b = 2500 s/mm²), BSD-2-Clause (see its <code>LICENSE</code>).
{{if .Whole}}Fitted: the whole brain mask, {{.S.DMRI.Fitted}} voxels.{{else}}Fitted: slices {{index .S.DMRI.Slab 0}}–{{sub1 (index .S.DMRI.Slab 1)}} only,
{{.S.DMRI.Fitted}} of the {{.S.DMRI.InMask}} mask voxels (<code>prism demo</code> without <code>--quick</code> or <code>--slices</code> fits the whole brain).{{end}}
Settings: λ = {{.S.DMRI.Settings.Lambda}}, {{.S.DMRI.Settings.Samples}} joint samples × {{.S.DMRI.Settings.Steps}} {{.S.DMRI.Settings.Solver}} steps per voxel;
{{f1 .S.DMRI.VoxelsPerSecond}} voxels/s. The folder <code>dmri/</code> has the BedpostX layout
(<code>merged_*samples</code>, <code>dyads*</code>, …) plus <code>nfibres_prob</code>, <code>model_prob</code>,
<code>map_model</code>, <code>pp_rmse</code> and MRtrix-style <code>peaks</code>.</p>
<table>
<tr><th>most probable number of fibres</th>{{range $k, $v := .S.DMRI.NFibres}}<th>{{$k}}</th>{{end}}</tr>
<tr><td>fraction of fitted voxels</td>{{range .S.DMRI.NFibres}}<td>{{pct .}}</td>{{end}}</tr>
</table>
{{range .S.DMRI.Figures}}<figure><img src="{{.Path}}" alt="{{.Title}}"><figcaption><b>{{.Title}}.</b> {{.Caption}}</figcaption></figure>
{{end}}

<h2>2. Symbolic regression: model posterior across λ</h2>
<p>Observation: <code>data/symbolic-k15-example.jsonl</code>, 1000 points simulated from
<b>{{.S.Symbolic.TrueModel}}</b> (mask <code>{{.S.Symbolic.TrueMask}}</code>). λ trades fit against
complexity at test time, without retraining: small λ favours few components.</p>
{{range .S.Symbolic.Figures}}<figure{{if .Wide}} class="wide"{{end}}><img src="{{.Path}}" alt="{{.Title}}"><figcaption><b>{{.Title}}.</b> {{.Caption}}</figcaption></figure>
{{end}}
<table>
<tr><th>λ</th><th>active base components (median, 90 %)</th><th>most probable drawn models, q(M | x, λ)</th></tr>
{{range .S.Symbolic.Sweep}}<tr><td>{{.Lambda}}</td><td>{{.ActiveMedian}} [{{.ActiveQ05}}, {{.ActiveQ95}}]</td><td>{{range $i, $m := .Top}}{{if $i}}<br>{{end}}{{if $m.IsTrue}}<b>{{$m.Label}}</b> (truth){{else}}{{$m.Label}}{{end}}: {{g3 $m.Prob}}{{end}}</td></tr>
{{end}}</table>

<h2>Run</h2>
<table>
<tr><th>model</th><th>family</th><th>training steps</th><th>SHA-256</th><th>trained with</th></tr>
{{range .S.Models}}<tr><td>{{.Name}}</td><td>{{.Family}}</td><td>{{.Step}}</td><td><code>{{short .SHA256}}…</code></td><td><code>{{.Train}}</code></td></tr>
{{end}}</table>
<table>
<tr><th>stage</th><th>wall (s)</th><th>CPU (s)</th></tr>
{{range $k, $v := .S.Stages}}<tr><td>{{$k}}</td><td>{{f1 $v.Wall}}</td><td>{{f1 $v.CPU}}</td></tr>
{{end}}<tr><td>total</td><td>{{f1 .S.Total.Wall}}</td><td>{{f1 .S.Total.CPU}}</td></tr>
</table>
<p>{{.S.GoVersion}}, {{.S.Kernels}} kernels, {{.S.Workers}} workers, started {{.S.Started}}.</p>
<script>
window.addEventListener("load", function () {
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++) {
    if (imgs[i].complete && imgs[i].naturalWidth > 0) { ok++; }
  }
  var el = document.getElementById("` + ImageCheckID + `");
  el.setAttribute("data-loaded", String(ok));
  el.setAttribute("data-total", String(imgs.length));
  el.textContent = ok + " of " + imgs.length + " figures loaded";
});
</script>
</body>
</html>
`))

// writeReport writes index.html for summary s.
func writeReport(path string, s *Summary) error {
	var buf bytes.Buffer
	err := reportTemplate.Execute(&buf, struct {
		S      *Summary
		Whole  bool
		Images int
	}{s, s.DMRI.Slab == [2]int{0, s.DMRI.Grid[2]}, len(s.DMRI.Figures) + len(s.Symbolic.Figures)})
	if err != nil {
		return fmt.Errorf("demo: report: %w", err)
	}
	if err := atomicfile.WriteBytes(path, buf.Bytes()); err != nil {
		return fmt.Errorf("demo: report: %w", err)
	}
	return nil
}
