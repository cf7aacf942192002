package spec

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prismsbi/prism/family"
)

// faultFamily builds the fault-test family (testdata/fault.yaml) whose
// simulator runs in the given mode; extra arguments follow the mode.
func faultFamily(t *testing.T, mode string, extra ...string) External {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	text, err := os.ReadFile("testdata/fault.yaml")
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(append([]string{mode}, extra...), ", ")
	spec := strings.Replace(string(text), "MODE", args, 1)
	if mode != "hang" {
		// Only the hang test needs the short timeout; the others must see
		// their own fault even when a loaded machine takes longer than
		// 500 ms to start Python.
		spec = strings.Replace(spec, "timeout: 500ms", "timeout: 60s", 1)
	}
	dir, _ := filepath.Abs("testdata")
	f, err := Parse([]byte(spec), dir)
	if err != nil {
		t.Fatal(err)
	}
	e := f.(External)
	t.Cleanup(func() { e.Close() })
	return e
}

func simulate(f family.Family, n int) ([]family.Sample, int, error) {
	out := make([]family.Sample, n)
	dropped, err := family.TrySimulateBatch(f, family.SimOptions{Seed: 7, Lambda: 0.5}, 100, out)
	return out, dropped, err
}

// TestExternalOK: a working simulator's values arrive in order for every
// sample (x_j = a + j for the active Level component).
func TestExternalOK(t *testing.T) {
	f := faultFamily(t, "ok")
	out, dropped, err := simulate(f, 37)
	if err != nil || dropped != 0 {
		t.Fatalf("err %v, dropped %d", err, dropped)
	}
	for _, s := range out {
		a := 0.0
		if s.Mask[0] {
			a = f.Natural(s.Theta, s.Mask).Components[0]["a"]
		}
		for j, v := range s.X {
			if v != a+float64(j) {
				t.Fatalf("sample %d value %d: %v, want %v", s.Index, j, v, a+float64(j))
			}
		}
	}
	// Same seed, same stream, whatever the batch split.
	again := make([]family.Sample, 10)
	if _, err := family.TrySimulateBatch(f, family.SimOptions{Seed: 7, Lambda: 0.5}, 105, again); err != nil {
		t.Fatal(err)
	}
	if again[0].X[1] != out[5].X[1] || again[0].SimSeed != out[5].SimSeed {
		t.Errorf("sample 105 differs between batchings")
	}
}

// TestExternalFaults: every fault ends in the documented error, naming the
// batch (its sample range), the first sample's components and the cause,
// within the timeout × attempts, and leaves no process behind.
func TestExternalFaults(t *testing.T) {
	cases := []struct{ mode, want string }{
		{"crash", "boom: simulated crash"},
		{"hang", "no reply within the timeout of 500ms"},
		{"short", "short write: the reply ended after 64 of 128 bytes"},
		{"count", "wrote 3 values per observation, want 4"},
		{"nan-all", "still gave a NaN or infinite observation after 1 redraw(s)"},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			f := faultFamily(t, c.mode)
			t0 := time.Now()
			_, _, err := simulate(f, 4)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			for _, w := range []string{c.want, "samples 10", "mask "} {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			if c.mode != "nan-all" && !strings.Contains(msg, "after 2 attempt(s)") {
				t.Errorf("error %q does not say it retried once", msg)
			}
			// Two attempts of at most the 500 ms timeout (hang) or of a
			// fault reported at once, plus start-up: far below the 60 s
			// timeout the other modes have, so no fault waits for it.
			if d := time.Since(t0); d > 20*time.Second {
				t.Errorf("took %v", d)
			}
			t.Log(msg)
		})
	}
}

// TestExternalRecovers: a simulator that crashes once is restarted and the
// batch resent (retries), and non-finite observations of some samples are
// dropped and redrawn, counted, with every returned observation finite.
func TestExternalRecovers(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "crashed")
	f := faultFamily(t, "flaky", marker)
	out, _, err := simulate(f, 8)
	if err != nil {
		t.Fatalf("flaky simulator not recovered: %v", err)
	}
	if _, err := os.Stat(marker); err != nil || len(out[0].X) != 4 {
		t.Fatalf("the first attempt did not crash (%v)", err)
	}
	g := faultFamily(t, "nan-some")
	g.ext.retries = 20 // a < 0.5 has probability ½ per draw (while Level is on)
	out, dropped, err := simulate(g, 64)
	if err != nil {
		t.Fatal(err)
	}
	if dropped == 0 {
		t.Error("no sample dropped, though about a quarter give NaN")
	}
	for _, s := range out {
		if !finite(s.X) {
			t.Fatalf("sample %d not finite after redraws", s.Index)
		}
	}
	t.Logf("dropped %d of 64", dropped)
}

// TestExternalPerObservationDesigns: with observation.covariate the hello
// frame names the covariate (grid null) and every batch carries each
// sample's covariate values; samples of different design lengths go in
// separate frames. The simulator returns x_j = a + t_j, checked exactly.
func TestExternalPerObservationDesigns(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	text, err := os.ReadFile("testdata/points.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := filepath.Abs("testdata")
	fam, err := Parse(text, dir)
	if err != nil {
		t.Fatal(err)
	}
	f := fam.(External)
	t.Cleanup(func() { f.Close() })
	out, dropped, err := simulate(f, 9)
	if err != nil || dropped != 0 {
		t.Fatalf("err %v, dropped %d", err, dropped)
	}
	// Three samples measured at 2 times, the rest at 5 (two frames).
	for i := range 3 {
		out[i].Design = family.Design{N: 2, CovDim: 1, Cov: []float64{1, 2.5}}
		out[i].X = out[i].X[:2]
	}
	bad := make([]bool, len(out))
	if err := f.ext.simulate(out, bad); err != nil {
		t.Fatal(err)
	}
	for _, s := range out {
		if s.Design.N != len(s.X) {
			t.Fatalf("sample %d: %d values for %d times", s.Index, len(s.X), s.Design.N)
		}
		a := 0.0
		if s.Mask[0] {
			a = f.Natural(s.Theta, s.Mask).Components[0]["a"]
		}
		for j, v := range s.X {
			if want := a + s.Design.Cov[j]; v != want {
				t.Fatalf("sample %d value %d: %v, want %v (t = %v)", s.Index, j, v, want, s.Design.Cov[j])
			}
		}
	}
}
