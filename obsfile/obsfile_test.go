package obsfile

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
	fdmri "github.com/prismsbi/prism/family/dmri"
	"github.com/prismsbi/prism/family/lingauss"
	"github.com/prismsbi/prism/gradtable"
)

// dmriLine is a JSON line of the b3s family with its own table: one b = 0
// volume and the 6 directions of a tensor-determining table at b = 1000,
// with b-values bvals (nil: the default) and signal x.
func dmriLine(x string, bvals string, bvecs string) string {
	if bvals == "" {
		bvals = "0, 1000, 1000, 1000, 1000, 1000, 1000"
	}
	if bvecs == "" {
		bvecs = "[0,0,0],[1,0,0],[0,1,0],[0,0,1],[0.6,0.8,0],[0,0.6,0.8],[0.8,0,0.6]"
	}
	if x == "" {
		x = "1, 0.5, 0.4, 0.6, 0.45, 0.5, 0.55"
	}
	return fmt.Sprintf(`{"x": [%s], "bvals": [%s], "bvecs": [%s]}`, x, bvals, bvecs)
}

func TestReadJSONLinesValidation(t *testing.T) {
	b3s := fdmri.B3S()
	for _, tc := range []struct {
		name string
		text string
		want string // "" for success
	}{
		{"valid table", dmriLine("", "", ""), ""},
		{"unnormalised direction is normalised", dmriLine("", "", "[0,0,0],[2,0,0],[0,1,0],[0,0,1],[0.6,0.8,0],[0,0.6,0.8],[0.8,0,0.6]"), ""},
		{"null in x", dmriLine("1, 0.5, null, 0.6, 0.45, 0.5, 0.55", "", ""), "x[2] is null"},
		{"1e39 in x", dmriLine("1, 0.5, 1e39, 0.6, 0.45, 0.5, 0.55", "", ""), "x[2]: 1e+39 is beyond the float32 range"},
		{"1e30 in x (implausible signal)", dmriLine("1, 0.5, 1e30, 0.6, 0.45, 0.5, 0.55", "", ""), "x[2] = 1e+30: a normalised diffusion signal"},
		{"negative b-value", dmriLine("", "0, -1000, 1000, 1000, 1000, 1000, 1000", ""), "measurement 2: b-value -1000"},
		{"zero b-vector at b > 0", dmriLine("", "", "[0,0,0],[0,0,0],[0,1,0],[0,0,1],[0.6,0.8,0],[0,0.6,0.8],[0.8,0,0.6]"), "measurement 2: b = 1000 s/mm² with direction [0 0 0]"},
		{"null in bvecs", dmriLine("", "", "[0,0,0],[1,null,0],[0,1,0],[0,0,1],[0.6,0.8,0],[0,0.6,0.8],[0.8,0,0.6]"), "bvecs[1][1] is null"},
		{"all b = 0", dmriLine("", "0, 0, 0, 0, 0, 0, 0", ""), "every volume is a b ≤ 50"},
		{"b in ms/µm²", dmriLine("", "0, 1, 1, 1, 1, 1, 1", ""), "multiply them by 1000"},
		{"identical directions", dmriLine("", "", "[0,0,0],[1,0,0],[1,0,0],[1,0,0],[1,0,0],[1,0,0],[1,0,0]"), "1 distinct axes"},
		{"short bvecs", `{"x": [1, 0.5], "bvals": [0, 1000], "bvecs": [[0,0,0]]}`, `2 values with 2 "bvals" and 1 "bvecs"`},
		{"no x", `{"bvals": [0]}`, `no "x" values`},
		{"not JSON", `{"x": [1, 2`, "unexpected end of JSON input"},
		{"x of strings", `{"x": ["a"]}`, "cannot unmarshal string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := ReadJSONLines(strings.NewReader("\n"+tc.text+"\n"), "obs.jsonl", b3s, nil)
			if tc.want == "" {
				if err != nil || len(recs) != 1 {
					t.Fatalf("%d records, err %v", len(recs), err)
				}
				for k := 1; k < recs[0].Obs.Design.N; k++ {
					g := recs[0].Obs.Design.Row(k)[1:]
					if n := math.Sqrt(g[0]*g[0] + g[1]*g[1] + g[2]*g[2]); math.Abs(n-1) > 1e-12 {
						t.Fatalf("direction %d has length %v", k, n)
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "obs.jsonl:2: ") {
				t.Fatalf("err = %v, want obs.jsonl:2: … %q", err, tc.want)
			}
		})
	}
}

// TestReadDefaultDesign: lines without a table use the design function
// (called once), CSV too; an unusable value is refused in both formats.
func TestReadDefaultDesign(t *testing.T) {
	f := lingauss.New()
	grid := lingauss.Grid()
	calls := 0
	design := func() (family.Design, error) {
		calls++
		d := family.Design{N: len(grid), CovDim: 1, Cov: grid, Name: "grid"}
		return d, nil
	}
	row := func(v string) []string {
		r := make([]string, len(grid))
		for i := range r {
			r[i] = "0.5"
		}
		r[1] = v
		return r
	}
	js := func(v string) string { return `{"x": [` + strings.Join(row(v), ",") + `]}` }
	recs, err := ReadJSONLines(strings.NewReader(js("1")+"\n"+js("2")+"\n"), "a.jsonl", f, design)
	if err != nil || len(recs) != 2 || calls != 1 || recs[1].Obs.X[1] != 2 {
		t.Fatalf("%d records, %d design calls, err %v", len(recs), calls, err)
	}
	if _, err := ReadJSONLines(strings.NewReader(js("null")), "a.jsonl", f, design); err == nil || !strings.Contains(err.Error(), "a.jsonl:1: x[1] is null") {
		t.Errorf("null: err = %v", err)
	}
	csv := strings.Join(row("1"), ",") + "\n# comment\n" + strings.Join(row("1e39"), ",") + "\n"
	if _, err := ReadCSV(strings.NewReader(csv), "b.csv", f, design); err == nil || !strings.Contains(err.Error(), "b.csv:3: column 2: 1e+39 is beyond the float32 range") {
		t.Errorf("CSV 1e39: err = %v", err)
	}
	if _, err := ReadCSV(strings.NewReader("1,2\n"), "b.csv", f, design); err == nil || !strings.Contains(err.Error(), "b.csv:1: 2 values for a design of") {
		t.Errorf("CSV length: err = %v", err)
	}
}

// FuzzReadJSONLines: no input makes the reader panic, and every record it
// accepts holds only finite values within float32's range on a design of
// matching length.
func FuzzReadJSONLines(f *testing.F) {
	f.Add([]byte(dmriLine("", "", "")))
	f.Add([]byte(dmriLine("1, 0.5, null, 0.6, 0.45, 0.5, 0.55", "", "")))
	f.Add([]byte(`{"x": [1e39]}` + "\n" + `{"x": [1], "bvals": [0], "bvecs": [[0, 0, 0]]}`))
	f.Add([]byte(`{"x": [], "mask": [1, 0], "theta": {}}`))
	b3s := fdmri.B3S()
	design := func() (family.Design, error) { return fdmri.UKBDesign(), nil }
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := ReadJSONLines(strings.NewReader(string(data)), "fuzz", b3s, design)
		if err != nil {
			return
		}
		for _, r := range recs {
			if r.Obs.Design.N != len(r.Obs.X) {
				t.Fatalf("design of %d measurements for %d values", r.Obs.Design.N, len(r.Obs.X))
			}
			for _, v := range r.Obs.X {
				if math.IsNaN(v) || math.Abs(v) > gradtable.MaxSignalRatio {
					t.Fatalf("accepted value %v", v)
				}
			}
			if err := gradtable.CheckDesign(r.Obs.Design); err != nil {
				t.Fatalf("accepted design: %v", err)
			}
		}
	})
}
