package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/prismsbi/prism/data"
	"github.com/prismsbi/prism/records"
)

// syncBuffer is a bytes buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// screenshotDir is where the browser test leaves its screenshots:
// $PRISM_SCREENSHOT_DIR, or artifacts/view-screenshots at the repository
// root (ignored by git; CI keeps it).
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("PRISM_SCREENSHOT_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "artifacts", "view-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startView runs `prism view ARGS --listen 127.0.0.1:0` in the test
// process and returns its address; the server stops at the end of the
// test.
func startView(t *testing.T, args ...string) string {
	t.Helper()
	return startViewTo(t, &syncBuffer{}, args...)
}

// startViewTo is startView with the command's stderr in stderr.
func startViewTo(t *testing.T, stderr *syncBuffer, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	old := viewContext
	viewContext = func(io.Writer) (context.Context, func()) { return ctx, cancel }
	var stdout syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(append([]string{"view", "--listen", "127.0.0.1:0"}, args...), &stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("prism view exited %d: %s", code, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("prism view did not stop")
		}
		viewContext = old
	})
	re := regexp.MustCompile(`open (http://127\.0\.0\.1:\d+)/`)
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			return m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("prism view exited %d before serving: %s", code, stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("prism view printed no address: %s %s", stdout.String(), stderr.String())
	return ""
}

// TestViewBrowser starts `prism view --example` and drives it with
// headless Chromium: it moves the λ slider and checks that the models
// and probabilities shown are `prism select`'s at that λ, that the
// predictive band changes with λ and with the global/local toggle, that
// moving the dMRI λ slider refits the shown slice, and that clicking a
// voxel opens its panel. Screenshots go to screenshotDir. Chromium is
// needed unless it is absent and PRISM_REQUIRE_CHROMIUM is unset.
func TestViewBrowser(t *testing.T) {
	browser := findChromium()
	if browser == "" {
		if os.Getenv("PRISM_REQUIRE_CHROMIUM") != "" {
			t.Fatal("PRISM_REQUIRE_CHROMIUM is set but no chromium, chromium-browser or google-chrome is on PATH")
		}
		t.Skip("headless Chromium not installed (apt-get install -y chromium): viewer not driven")
	}
	addr := startView(t, "--example")
	shots := screenshotDir(t)

	// Chromium's helper processes may still write into its profile for a
	// moment after the browser exits, so the profile is not a t.TempDir
	// (whose removal would fail the test): it is removed best effort.
	profile, err := os.MkdirTemp("", "prism-view-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for range 20 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1400, 1300),
		chromedp.UserDataDir(profile))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, tcancel := context.WithTimeout(ctx, 4*time.Minute)
	defer tcancel()

	do := func(what string, actions ...chromedp.Action) {
		t.Helper()
		if err := chromedp.Run(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	screenshot := func(name string) {
		t.Helper()
		var png []byte
		do("screenshot "+name, chromedp.FullScreenshot(&png, 100))
		if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	eval := func(js string, out any) {
		t.Helper()
		do("evaluate "+js, chromedp.Evaluate(js, out))
	}
	waitFor := func(what, js string) {
		t.Helper()
		do("wait for "+what, chromedp.Poll(js, nil, chromedp.WithPollingTimeout(2*time.Minute)))
	}

	do("open", chromedp.Navigate(addr+"/"))
	waitFor("the page", `document.body.dataset.ready === "1" && document.body.dataset.gridLambda === "0.5" && document.body.dataset.marginals !== undefined`)
	screenshot("view-grid-lambda-0.5.png")
	var bandBefore string
	eval(`document.getElementById("band").toDataURL()`, &bandBefore)

	// Move the slider with the mouse: a click at a fifth of its width.
	var box []float64
	eval(`(() => { const r = document.getElementById("grid-lambda").getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()`, &box)
	do("click the λ slider", chromedp.MouseClickXY(box[0]+0.2*box[2], box[1]+box[3]/2))
	var lambdaStr string
	eval(`document.getElementById("grid-lambda").value`, &lambdaStr)
	if lambdaStr == "0.5" {
		t.Fatal("the click did not move the λ slider")
	}
	waitFor("the update at λ = "+lambdaStr, `document.body.dataset.gridLambda === document.getElementById("grid-lambda").value`)
	screenshot("view-grid-lambda-" + lambdaStr + ".png")
	var bandAfter string
	eval(`document.getElementById("band").toDataURL()`, &bandAfter)
	if bandAfter == bandBefore {
		t.Error("the predictive band image did not change when λ moved")
	}

	// The models and probabilities shown equal prism select's.
	type shownRow struct {
		Mask, Q, Text string
	}
	var rows []shownRow
	eval(`[...document.querySelectorAll("#top-models tbody tr")].map(r => ({Mask: r.dataset.mask, Q: r.dataset.q, Text: r.cells[2].textContent}))`, &rows)
	if len(rows) == 0 {
		t.Fatal("no model shown")
	}
	dir := t.TempDir()
	cands := filepath.Join(dir, "candidates.txt")
	resp, err := http.Get(addr + "/api/grid/candidates")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("candidates: %v %s", err, resp.Status)
	}
	if err := os.WriteFile(cands, body, 0o644); err != nil {
		t.Fatal(err)
	}
	example := filepath.Join(dir, "example.jsonl")
	b, err := data.Files.ReadFile(data.SymbolicExample)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(example, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := prism("select", "--model", exampleGridModel, "--obs", example, "--lambda", lambdaStr,
		"--candidates", cands, "--top", fmt.Sprint(len(rows)), "--seed", "1")
	if code != 0 {
		t.Fatalf("prism select exit %d: %s", code, errs)
	}
	var sel struct {
		Top []records.Ranked `json:"top"`
	}
	if err := json.Unmarshal([]byte(out), &sel); err != nil {
		t.Fatal(err)
	}
	if len(sel.Top) != len(rows) {
		t.Fatalf("prism select lists %d models, the page %d", len(sel.Top), len(rows))
	}
	for i, r := range rows {
		want := math.Exp(sel.Top[i].LogQ)
		var got float64
		fmt.Sscan(r.Q, &got)
		// The page and prism select evaluate the same network on the same
		// observation, λ and candidates through posterior.TopK, and the
		// number reaches the DOM as a shortest round-trip decimal: they
		// agree to the last bit but for exp's rounding.
		if r.Mask != sel.Top[i].Mask || math.Abs(got-want) > 1e-12*want {
			t.Errorf("rank %d: page %s q=%s, prism select %s q=%v", i+1, r.Mask, r.Q, sel.Top[i].Mask, want)
		}
		if r.Text != fmt.Sprintf("%.4f", want) {
			t.Errorf("rank %d: shown %q, want %.4f", i+1, r.Text, want)
		}
	}

	// The local predictive of the selected model differs from the global one.
	do("choose the local predictive", chromedp.Click(`input[name="predictive"][value="local"]`, chromedp.ByQuery))
	waitFor("the local band", `document.body.dataset.gridBand === "local"`)
	var bandLocal string
	eval(`document.getElementById("band").toDataURL()`, &bandLocal)
	if bandLocal == bandAfter {
		t.Error("the local predictive band is the global one")
	}
	screenshot("view-grid-local.png")

	// dMRI: move the λ slider (refit of the shown slices), click a voxel.
	do("open the dMRI tab", chromedp.Click(`nav button[data-tab="dmri"]`, chromedp.ByQuery))
	axialReady := `(() => { const i = document.getElementById("slice-2"); return i.complete && i.naturalWidth > 0; })()`
	waitFor("the axial slice", axialReady)
	axialPixels := `(() => { const i = document.getElementById("slice-2"), c = document.createElement("canvas");
		c.width = i.naturalWidth; c.height = i.naturalHeight; c.getContext("2d").drawImage(i, 0, 0); return c.toDataURL(); })()`
	var sliceBefore string
	eval(axialPixels, &sliceBefore)
	eval(`(() => { const r = document.getElementById("dmri-lambda").getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()`, &box)
	do("click the dMRI λ slider", chromedp.MouseClickXY(box[0]+0.9*box[2], box[1]+box[3]/2))
	waitFor("the slice refit", `document.body.dataset.dmriRefits === "1"`)
	waitFor("the refitted axial slice", axialReady)
	var sliceAfter string
	eval(axialPixels, &sliceAfter)
	if sliceAfter == sliceBefore {
		t.Error("the axial nfibres_prob slice did not change after the refit at another λ")
	}
	// Click the fitted voxel nearest the centre of the axial slice (black
	// pixels lie outside the mask).
	var click []float64
	eval(`(() => { const i = document.getElementById("slice-2"), c = document.createElement("canvas");
		const w = i.naturalWidth, h = i.naturalHeight; c.width = w; c.height = h;
		const g = c.getContext("2d"); g.drawImage(i, 0, 0); const d = g.getImageData(0, 0, w, h).data;
		let best = null, bd = Infinity;
		for (let v = 0; v < h; v++) for (let u = 0; u < w; u++) {
			const k = 4 * (v * w + u); if (d[k] + d[k + 1] + d[k + 2] === 0) continue;
			const dist = (u - w / 2) ** 2 + (v - h / 2) ** 2; if (dist < bd) { bd = dist; best = [u, v]; }
		}
		const r = i.getBoundingClientRect(), s = r.width / w;
		return [r.left + (best[0] + 0.5) * s, r.top + (best[1] + 0.5) * s, w, h, best[0], best[1]]; })()`, &click)
	do("click a voxel", chromedp.MouseClickXY(click[0], click[1]))
	waitFor("the voxel panel", `!document.getElementById("voxel-panel").hidden && document.querySelectorAll("#voxel-models tbody tr").length > 0`)
	var panel struct {
		Voxel  string
		Probs  []float64
		Axial  int
		Points int
	}
	eval(`({Voxel: document.getElementById("voxel-panel").dataset.voxel,
		Probs: [...document.querySelectorAll("#voxel-models tbody tr")].map(r => Number(r.dataset.p)),
		Axial: Number(document.getElementById("index-2").value),
		Points: Number(document.getElementById("sphere").dataset.points)})`, &panel)
	var at [3]int
	if _, err := fmt.Sscanf(panel.Voxel, "%d,%d,%d", &at[0], &at[1], &at[2]); err != nil {
		t.Fatalf("voxel panel data %q: %v", panel.Voxel, err)
	}
	// The axial view shows x to the right and y upwards.
	if want := [3]int{int(click[4]), int(click[3]) - 1 - int(click[5]), panel.Axial}; at != want {
		t.Errorf("clicked pixel (%v, %v) of axial slice %d opened voxel %v, want %v", click[4], click[5], panel.Axial, at, want)
	}
	if panel.Points == 0 {
		t.Error("the sphere shows no fibre direction")
	}
	var sum float64
	for _, p := range panel.Probs {
		sum += p
	}
	// The model probabilities are float32 values renormalised to 1.
	if math.Abs(sum-1) > 1e-5 {
		t.Errorf("the voxel's model probabilities sum to %v", sum)
	}
	// The click also computes the slices through the voxel at the current
	// λ (the sagittal one is new): wait for it before the screenshot.
	waitFor("the slices through the clicked voxel", `document.body.dataset.dmriRefits === "2" &&
		[0, 1, 2].every(a => { const i = document.getElementById("slice-" + a); return i.complete && i.naturalWidth > 0; })`)
	screenshot("view-dmri-voxel.png")
}
