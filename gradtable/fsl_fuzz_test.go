package gradtable

import (
	"math"
	"testing"
)

// FuzzParseFSL: no pair of bval/bvec contents makes the reader panic, and
// every table it accepts has finite non-negative b-values and unit
// directions, zero ones only at b ≤ BZero. CheckDesign must not panic on
// it either.
func FuzzParseFSL(f *testing.F) {
	f.Add([]byte("0 1000 2000\n"), []byte("0 1 0\n0 0 0.6\n0 0 0.8\n"))
	f.Add([]byte("0 5 1000\n"), []byte("nan 0 1\nnan 0 0\nnan 1 0\n"))
	f.Add([]byte("0 2500\n"), []byte("0 0 0\n1 0 0\n"))
	f.Add([]byte("# comment\n1e400 -1\n"), []byte("1 2 3\n"))
	f.Add([]byte("0 1 1 1 1 1 1\n"), []byte("0 1 0 0 0.6 0.8 0\n0 0 0.6 0 0.8 0 1\n0 0 0.8 1 0 0.6 0\n"))
	f.Fuzz(func(t *testing.T, bval, bvec []byte) {
		d, err := ParseFSL(bval, bvec, "fuzz.bval", "fuzz.bvec")
		if err != nil {
			return
		}
		if d.N <= 0 || d.CovDim != 4 || len(d.Cov) != 4*d.N {
			t.Fatalf("design N %d, CovDim %d, %d covariates", d.N, d.CovDim, len(d.Cov))
		}
		for j := range d.N {
			r := d.Row(j)
			if math.IsNaN(r[0]) || math.IsInf(r[0], 0) || r[0] < 0 {
				t.Fatalf("row %d: b = %v", j, r[0])
			}
			n := math.Sqrt(r[1]*r[1] + r[2]*r[2] + r[3]*r[3])
			if !(math.Abs(n-1) < 1e-9 || (n == 0 && r[0] <= BZero)) {
				t.Fatalf("row %d: b = %v with direction of length %v", j, r[0], n)
			}
		}
		_ = CheckDesign(d)
	})
}
