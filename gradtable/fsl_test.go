package gradtable

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
)

// sharedData is the project's read-only test data, relative to the package
// directory.
const sharedData = "../../shared/data/dmri"

// TestReadFSLSharedData reads every gradient table of the shared test data
// and checks its length, its shells (as documented in the data READMEs) and
// that every diffusion-weighted direction is a unit vector.
func TestReadFSLSharedData(t *testing.T) {
	if _, err := os.Stat(sharedData); err != nil {
		t.Skipf("shared dMRI data not available: %v", err)
	}
	cases := []struct {
		prefix string
		n      int
		shells map[float64]int // b rounded to the nearest 100 → count; nil = skip
		zeroG  int             // directions stored as (0,0,0)
	}{
		{"dipy-small/small_64D", 65, nil, 1},
		{"dipy-small/small_101D", 102, nil, 0},
		{"dipy-small/small_25", 26, map[float64]int{0: 1, 2000: 25}, -1},
		{"mrtrix3-b3000-roi/dwi", 68, map[float64]int{0: 8, 3000: 60}, -1},
		{"mrtrix3-msmt-slab/dwi", 102, map[float64]int{0: 6, 700: 16, 1200: 30, 2800: 50}, -1},
		{"xa30-prisma-b2500-wholebrain/dwi_PA", 21, map[float64]int{0: 1, 2500: 20}, -1},
		{"xa30-prisma-b2500-wholebrain/dwi_AP", 21, map[float64]int{0: 1, 2500: 20}, -1},
	}
	for _, c := range cases {
		p := filepath.Join(sharedData, c.prefix)
		d, err := ReadFSL(p+".bval", p+".bvec")
		if err != nil {
			t.Errorf("%s: %v", c.prefix, err)
			continue
		}
		if d.N != c.n || d.CovDim != 4 || len(d.Cov) != 4*c.n {
			t.Errorf("%s: N=%d CovDim=%d, want N=%d", c.prefix, d.N, d.CovDim, c.n)
		}
		checkUnit(t, d)
		if c.shells != nil {
			got := map[float64]int{}
			for j := 0; j < d.N; j++ {
				got[math.Round(d.Row(j)[0]/100)*100]++
			}
			for b, n := range c.shells {
				if got[b] != n {
					t.Errorf("%s: %d volumes at b≈%v, want %d (all: %v)", c.prefix, got[b], b, n, got)
				}
			}
		}
		zero := 0
		for j := 0; j < d.N; j++ {
			r := d.Row(j)
			if r[1] == 0 && r[2] == 0 && r[3] == 0 {
				zero++
			}
		}
		if c.zeroG >= 0 && zero != c.zeroG {
			t.Errorf("%s: %d zero directions, want %d", c.prefix, zero, c.zeroG)
		}
	}
	// small_64D.bvec is transposed (65×3) with a NaN first row at b=0; the
	// second row must come through unchanged (it is already unit length).
	p := filepath.Join(sharedData, "dipy-small/small_64D")
	d, err := ReadFSL(p+".bval", p+".bvec")
	if err == nil {
		want := [3]float64{4.163478118279527636e-03, 9.999827048187632794e-01, -4.153975602799726656e-03}
		r := d.Row(1)
		for i := range want {
			if math.Abs(r[i+1]-want[i]) > 1e-6 {
				t.Errorf("small_64D direction 2 = %v, want %v", r[1:], want)
				break
			}
		}
		if d.Row(0)[0] != 0 || d.Row(0)[1] != 0 {
			t.Errorf("small_64D b0 row = %v, want b=0 with zero direction", d.Row(0))
		}
	}
}

// TestReadFSLErrors checks that malformed tables fail with messages that
// name the file and the problem, and that the accepted layouts parse.
func TestReadFSLErrors(t *testing.T) {
	dir := t.TempDir()
	try := func(bval, bvec string) error {
		bv, bc := filepath.Join(dir, "t.bval"), filepath.Join(dir, "t.bvec")
		write(t, bv, bval)
		write(t, bc, bvec)
		_, err := ReadFSL(bv, bc)
		return err
	}
	cases := []struct {
		name, bval, bvec, want string
	}{
		{"count", "0 1000 1000", "1 0\n0 1\n0 0\n", "expected 3 rows of 3 values"},
		{"nan at b>0", "0 1000", "nan nan\nnan 0\nnan 0\n", "direction 2"},
		{"zero at b>0", "0 1000", "0 0\n0 0\n0 0\n", "zero length"},
		{"token", "0 1e3x", "1 0\n0 1\n0 0\n", `"1e3x" is not a number`},
		{"negative b", "0 -5", "1 0\n0 1\n0 0\n", "non-negative"},
		{"empty", "\n", "1\n0\n0\n", "no b-values"},
		{"ragged", "0 1000 2000 3000", "1 0 0 1\n0 1 0\n0 0 1 0\n", "3 rows with 4, 3, 4 values"},
	}
	for _, c := range cases {
		err := try(c.bval, c.bvec)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "t.bv") {
			t.Errorf("%s: error %v, want one naming the file and containing %q", c.name, err, c.want)
		}
	}
	// Accepted: N×3 layout, comments, NaN at b≈0, non-unit vectors (normalised).
	if err := try("# b-values\n5 1000\n2000 0\n", "nan nan nan\n0 0 2\n3 4 0 # comment\n0 0 0\n"); err != nil {
		t.Errorf("N×3 table rejected: %v", err)
	}
	d, err := ReadFSL(filepath.Join(dir, "t.bval"), filepath.Join(dir, "t.bvec"))
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{5, 0, 0, 0, 1000, 0, 0, 1, 2000, 0.6, 0.8, 0, 0, 0, 0, 0}
	for i, v := range want {
		if math.Abs(d.Cov[i]-v) > 1e-15 {
			t.Fatalf("parsed %v, want %v", d.Cov, want)
		}
	}
	if _, err := ReadFSL(filepath.Join(dir, "nope.bval"), filepath.Join(dir, "t.bvec")); err == nil || !strings.Contains(err.Error(), "nope.bval") {
		t.Errorf("missing file: %v", err)
	}
}

// checkUnit: every direction has unit length, except the zero direction
// of a b ≤ BZero volume.
func checkUnit(t *testing.T, d family.Design) {
	t.Helper()
	for j := 0; j < d.N; j++ {
		r := d.Row(j)
		n := math.Sqrt(r[1]*r[1] + r[2]*r[2] + r[3]*r[3])
		if math.Abs(n-1) > 1e-12 && !(r[0] <= BZero && n == 0) {
			t.Errorf("%s: measurement %d (b=%v) has |g| = %v", d.Name, j, r[0], n)
		}
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
