package main

import (
	"context"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prismsbi/prism/internal/demo"
	"github.com/prismsbi/prism/internal/dirlock"
)

// TestDemoQuick runs the README's main command in its quick form and
// opens the report in headless Chromium: a screenshot of the page, and
// the DOM after load, where the report's script records how many of its
// images decoded. Chromium is needed unless it is absent and
// PRISM_REQUIRE_CHROMIUM is unset (.ci/run installs it and sets it).
//
// Its outputs are also compared with the golden hashes (golden_test.go):
// every file but the report (whose page shows timings) and the output
// lock, JSON files without their clocks and with the directory replaced.
func TestDemoQuick(t *testing.T) {
	pinWorkers(t)
	out := filepath.Join(t.TempDir(), "demo")
	code, stdout, stderr := prism("demo", "--quick", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	report := filepath.Join(out, demo.ReportFile)
	abs, _ := filepath.Abs(report)
	if !strings.Contains(stdout, abs) {
		t.Errorf("stdout does not say where the report is:\n%s", stdout)
	}
	// Progress: stage lines and the fit's progress bar.
	for _, want := range []string{"demo: dMRI: fitting", "demo: dMRI fit: [", "100%", "demo: symbolic:"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	var sum demo.Summary
	b, err := os.ReadFile(filepath.Join(out, demo.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	figures := len(sum.DMRI.Figures) + len(sum.Symbolic.Figures)
	if figures != 6 || sum.DMRI.Slab != [2]int{18, 20} {
		t.Errorf("%d figures, slab %v", figures, sum.DMRI.Slab)
	}
	for _, f := range []string{"dmri/nfibres_prob.nii.gz", "dmri/dyads1.nii.gz", "dmri/merged_f1samples.nii.gz",
		"dmri/model_prob.json", "dmri/run.json", "symbolic/sweep.json", "symbolic/predict.json",
		"data/xa30-prisma-b2500-wholebrain/LICENSE"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	checkGolden(t, "demo-quick", goldenHashes(t, out, demo.ReportFile, dirlock.FileName))

	browser := findChromium()
	if browser == "" {
		if os.Getenv("PRISM_REQUIRE_CHROMIUM") != "" {
			t.Fatal("PRISM_REQUIRE_CHROMIUM is set but no chromium, chromium-browser or google-chrome is on PATH")
		}
		t.Skip("headless Chromium not installed (apt-get install -y chromium): report not opened in a browser")
	}
	t.Run("screenshot", func(t *testing.T) {
		shot := filepath.Join(t.TempDir(), "report.png")
		chromium(t, browser, "--screenshot="+shot, "--window-size=1200,2400", report)
		fh, err := os.Open(shot)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		img, err := png.Decode(fh)
		if err != nil {
			t.Fatal(err)
		}
		// A rendered page is not one flat colour.
		bd := img.Bounds()
		if bd.Dx() != 1200 || bd.Dy() != 2400 {
			t.Errorf("screenshot %v, want 1200×2400", bd)
		}
		colours := map[[4]uint32]bool{}
		for y := bd.Min.Y; y < bd.Max.Y; y += 7 {
			for x := bd.Min.X; x < bd.Max.X; x += 7 {
				r, g, b, a := img.At(x, y).RGBA()
				colours[[4]uint32{r, g, b, a}] = true
			}
		}
		if len(colours) < 50 {
			t.Errorf("screenshot has %d distinct colours: blank page?", len(colours))
		}
	})
	t.Run("images", func(t *testing.T) {
		loaded, total := imagesLoaded(t, browser, report)
		if total != figures || loaded != total {
			t.Errorf("Chromium loaded %d of %d images, the report has %d figures", loaded, total, figures)
		}
	})
	// The check must be able to fail: with one figure corrupted, one image
	// fails to decode.
	t.Run("detects-broken-image", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(out)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, sum.Symbolic.Figures[0].Path), []byte("not a PNG"), 0o644); err != nil {
			t.Fatal(err)
		}
		loaded, total := imagesLoaded(t, browser, filepath.Join(dir, demo.ReportFile))
		if total != figures || loaded != figures-1 {
			t.Errorf("with one broken figure Chromium reports %d of %d loaded, want %d of %d", loaded, total, figures-1, figures)
		}
	})
}

// findChromium returns the first headless-capable browser on PATH.
func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// chromium runs the browser headless on a local page and returns stdout.
func chromium(t *testing.T, browser string, args ...string) string {
	t.Helper()
	page := args[len(args)-1]
	abs, err := filepath.Abs(page)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir()}, args[:len(args)-1]...)
	full = append(full, "file://"+abs)
	cmd := exec.CommandContext(ctx, browser, full...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", browser, full, err, stderr.String())
	}
	return string(outb)
}

// imagesLoaded opens a report and reads the image check its script
// writes into the DOM after the load event.
func imagesLoaded(t *testing.T, browser, report string) (loaded, total int) {
	t.Helper()
	dom := chromium(t, browser, "--dump-dom", report)
	re := regexp.MustCompile(`id="` + demo.ImageCheckID + `"[^>]*data-loaded="(-?\d+)"[^>]*data-total="(\d+)"`)
	m := re.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no image check element in the DOM:\n%.2000s", dom)
	}
	loaded, _ = strconv.Atoi(m[1])
	total, _ = strconv.Atoi(m[2])
	return loaded, total
}
