package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/family/dmri"
	"github.com/prismsbi/prism/family/lingauss"
	"github.com/prismsbi/prism/obsfile"
)

// prism runs one command line and returns exit code, stdout and stderr.
func prism(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestFamiliesTable(t *testing.T) {
	code, out, errs := prism("families")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, name := range family.Names() {
		if !strings.Contains(out, name) {
			t.Errorf("families output lacks %s", name)
		}
	}
	// 2^100 · 8 noise models, exactly.
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "symbolic-k100 ") && !strings.Contains(line, " 10141204801825835211973625643008 ") {
			t.Errorf("symbolic-k100 row: %q", line)
		}
	}
}

func TestFamiliesJSON(t *testing.T) {
	code, out, errs := prism("families", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var infos []family.Info
	if err := json.Unmarshal([]byte(out), &infos); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"lingauss-k6": "64", "b3s": "15", "bszt": "2048", "symbolic-k15": "163840"}
	for _, in := range infos {
		f, err := family.Lookup(in.Name)
		if err != nil {
			t.Fatal(err)
		}
		if in.C != len(f.Components()) || in.DMax != f.Layout().DMax || len(in.Components) != in.C {
			t.Errorf("%s: C=%d d_max=%d", in.Name, in.C, in.DMax)
		}
		if w, ok := want[in.Name]; ok && in.ModelSpace != w {
			t.Errorf("%s: model space %s, want %s", in.Name, in.ModelSpace, w)
		}
	}
}

// sampleLine is one line of `prism simulate` output.
type sampleLine struct {
	Index  uint64          `json:"index"`
	Lambda float64         `json:"lambda"`
	Mask   []int           `json:"mask"`
	Theta  family.Params   `json:"theta"`
	X      []float64       `json:"x"`
	Bvals  []float64       `json:"bvals"`
	Bvecs  [][3]float64    `json:"bvecs"`
	Extra  json.RawMessage `json:"-"`
}

func readLines(t *testing.T, path string) []sampleLine {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var lines []sampleLine
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l sampleLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line %d: %v", len(lines)+1, err)
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

func TestSimulateReproducible(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ fam, protocol string }{
		{"lingauss-k6", ""},
		{"b3s", "ukb"},
		{"b3s", "random"},
		{"symbolic-k15", ""},
	} {
		a := filepath.Join(dir, "a.jsonl")
		b := filepath.Join(dir, "b.jsonl")
		o := filepath.Join(dir, "o.jsonl")
		args := []string{"simulate", "--family", c.fam, "--n", "37", "--seed", "11", "--protocol", c.protocol}
		for _, out := range []string{a, b} {
			if code, _, errs := prism(append(args, "--out", out)...); code != 0 {
				t.Fatalf("%s: exit %d: %s", c.fam, code, errs)
			}
		}
		if code, _, errs := prism("simulate", "--family", c.fam, "--n", "37", "--seed", "12", "--protocol", c.protocol, "--out", o); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.fam, code, errs)
		}
		da, _ := os.ReadFile(a)
		db, _ := os.ReadFile(b)
		do, _ := os.ReadFile(o)
		if len(da) == 0 || !bytes.Equal(da, db) {
			t.Errorf("%s %s: same seed gave different output", c.fam, c.protocol)
		}
		if bytes.Equal(da, do) {
			t.Errorf("%s %s: seeds 11 and 12 gave identical output", c.fam, c.protocol)
		}
		if n := bytes.Count(da, []byte("\n")); n != 37 {
			t.Errorf("%s: %d lines, want 37", c.fam, n)
		}
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(matches) > 0 {
		t.Errorf("temporary files left behind: %v", matches)
	}
}

// TestSimulateMatchesLibrary checks the file against SimulateBatch: every
// float survives the text round trip exactly, θ is the family's Natural of
// the latent sample, and dMRI lines carry the design.
func TestSimulateMatchesLibrary(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ fam, protocol, lambda string }{
		{"lingauss-k6", "", "0.3"},
		{"b3s", "random", ""},
		{"bszt", "ukb", ""},
	} {
		out := filepath.Join(dir, c.fam+".jsonl")
		args := []string{"simulate", "--family", c.fam, "--n", "20", "--seed", "5", "--out", out}
		if c.protocol != "" {
			args = append(args, "--protocol", c.protocol)
		}
		if c.lambda != "" {
			args = append(args, "--lambda", c.lambda)
		}
		if code, _, errs := prism(args...); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.fam, code, errs)
		}
		lines := readLines(t, out)
		f, _ := family.Lookup(c.fam)
		ds, err := f.Designs(c.protocol)
		if err != nil {
			t.Fatal(err)
		}
		opt := family.SimOptions{Seed: 5, Lambda: math.NaN(), Designs: ds}
		if c.lambda != "" {
			opt.Lambda = 0.3
		}
		want := make([]family.Sample, 20)
		family.SimulateBatch(f, opt, 0, want)
		_, table := f.(family.TableDesigner)
		for i, l := range lines {
			s := want[i]
			if l.Index != uint64(i) || l.Lambda != s.Lambda || len(l.Mask) != len(s.Mask) || !slicesEqual(l.X, s.X) {
				t.Fatalf("%s line %d differs from SimulateBatch", c.fam, i)
			}
			for k, m := range l.Mask {
				if (m == 1) != s.Mask[k] {
					t.Fatalf("%s line %d: mask %v, want %s", c.fam, i, l.Mask, family.MaskString(s.Mask))
				}
			}
			wantTheta, _ := json.Marshal(f.Natural(s.Theta, s.Mask))
			gotTheta, _ := json.Marshal(l.Theta)
			if !bytes.Equal(wantTheta, gotTheta) {
				t.Errorf("%s line %d: theta %s, want %s", c.fam, i, gotTheta, wantTheta)
			}
			if table {
				if len(l.Bvals) != s.Design.N || len(l.Bvecs) != s.Design.N {
					t.Fatalf("%s line %d: %d bvals, %d bvecs for %d measurements", c.fam, i, len(l.Bvals), len(l.Bvecs), s.Design.N)
				}
				for j := 0; j < s.Design.N; j++ {
					row := s.Design.Row(j)
					if l.Bvals[j] != row[0] || l.Bvecs[j] != [3]float64{row[1], row[2], row[3]} {
						t.Fatalf("%s line %d: measurement %d is (%g, %v), want %v", c.fam, i, j, l.Bvals[j], l.Bvecs[j], row)
					}
				}
			} else if l.Bvals != nil || l.Bvecs != nil {
				t.Errorf("%s: non-dMRI line carries bvals/bvecs", c.fam)
			}
			if c.lambda != "" && l.Lambda != 0.3 {
				t.Errorf("λ = %g, want 0.3", l.Lambda)
			}
		}
	}
}

func slicesEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestForwardLingauss compares with the basis functions evaluated by hand.
func TestForwardLingauss(t *testing.T) {
	code, out, errs := prism("forward", "--family", "lingauss-k6", "--mask", "1001011",
		"--params", `{"components":{"0":{"c1":0.5},"3":{"c1":-2},"5":{"c1":1.25}}}`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct{ Y []float64 }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	x := lingauss.Grid()
	if len(res.Y) != len(x) {
		t.Fatalf("%d values, want %d", len(res.Y), len(x))
	}
	for j, xj := range x {
		want := 0.5 - 2*math.Sin(xj) + 1.25*math.Exp(-(xj-5)*(xj-5)/2)
		// Three terms of size ≤ 2: rounding ≲ 1e-15.
		if math.Abs(res.Y[j]-want) > 1e-14 {
			t.Errorf("y(%g) = %g, want %g", xj, res.Y[j], want)
		}
	}
}

// TestForwardRoundTripsSimulate feeds the natural parameters of simulated
// dMRI samples back through `prism forward` and compares with the forward
// model at the latent sample (Latent must invert Natural).
func TestForwardRoundTripsSimulate(t *testing.T) {
	dir := t.TempDir()
	// An FSL pair written from the UKB-like table, to exercise --bval/--bvec.
	ukb := dmri.UKBDesign()
	var bv, bc strings.Builder
	for r := 0; r < 4; r++ {
		for j := 0; j < ukb.N; j++ {
			v := ukb.Row(j)[r]
			s := formatG(v)
			if r == 0 {
				bv.WriteString(s + " ")
			} else {
				bc.WriteString(s + " ")
			}
		}
		if r > 0 {
			bc.WriteString("\n")
		}
	}
	prefix := filepath.Join(dir, "ukb")
	if err := os.WriteFile(prefix+".bval", []byte(bv.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prefix+".bvec", []byte(bc.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, fam := range []string{"b3s", "bszt"} {
		out := filepath.Join(dir, fam+".jsonl")
		if code, _, errs := prism("simulate", "--family", fam, "--n", "10", "--seed", "2", "--protocol", "ukb", "--out", out); code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		f, _ := family.Lookup(fam)
		want := make([]family.Sample, 10)
		family.SimulateBatch(f, family.SimOptions{Seed: 2, Lambda: math.NaN(), Designs: family.FixedDesign(ukb)}, 0, want)
		for i, l := range readLines(t, out) {
			params, _ := json.Marshal(l.Theta)
			mask := family.MaskString(want[i].Mask)
			for _, design := range [][]string{{"--protocol", "ukb"}, {"--bval", prefix + ".bval", "--bvec", prefix + ".bvec"}} {
				args := append([]string{"forward", "--family", fam, "--mask", mask, "--params", string(params)}, design...)
				code, stdout, errs := prism(args...)
				if code != 0 {
					t.Fatalf("%s sample %d: exit %d: %s", fam, i, code, errs)
				}
				var res struct{ Signal []float64 }
				if err := json.Unmarshal([]byte(stdout), &res); err != nil {
					t.Fatal(err)
				}
				ref := make([]float64, ukb.N)
				f.Forward(ukb, want[i].Theta, want[i].Mask, ref)
				for j := range ref {
					// Natural → latent → natural passes through Φ⁻¹∘Φ and
					// the incomplete-beta inverse; the signal (≤ 1) agrees
					// to ~1e-9.
					if math.Abs(res.Signal[j]-ref[j]) > 1e-7 {
						t.Fatalf("%s sample %d (%v): signal[%d] = %g, want %g", fam, i, design[0], j, res.Signal[j], ref[j])
					}
				}
			}
		}
	}
}

func formatG(v float64) string {
	b, _ := obsfile.AppendFloats(nil, []float64{v})
	return string(b[1 : len(b)-1])
}

func TestParamsFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(path, []byte(`{"components":{"1":{"c1":3}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := prism("forward", "--family", "lingauss-k6", "--mask", "0100001", "--params", path)
	if code != 0 || !strings.HasPrefix(out, `{"y":[0,0.03,`) {
		t.Errorf("exit %d, out %.40s, err %s", code, out, errs)
	}
}

func TestCLIErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		want string // substring of the error message
	}{
		{[]string{"forward", "--family", "lingauss-k6", "--mask", "100001", "--params", "{}"}, "--mask"},
		{[]string{"forward", "--family", "lingauss-k6", "--mask", "1000001", "--params", `{"components":{"0":{"c9":1}}}`}, `"c9"`},
		{[]string{"forward", "--family", "lingauss-k6", "--mask", "1000001", "--params", `{"components":{}}`}, "missing"},
		{[]string{"forward", "--family", "lingauss-k6", "--mask", "1000001", "--params", `{"component":{}}`}, "unknown field"},
		{[]string{"forward", "--family", "lingauss-k6", "--mask", "1000001", "--params", filepath.Join(dir, "none.json")}, "none.json"},
		{[]string{"forward", "--family", "lingauss-k6", "--mask", "1000001"}, "--params"},
		{[]string{"forward", "--family", "b3s", "--mask", "11001", "--params", "{}"}, "--bval and --bvec"},
		{[]string{"forward", "--family", "b3s", "--mask", "11001", "--protocol", "ukb", "--params", "{}"}, "fractions"},
		{[]string{"forward", "--family", "b3s", "--mask", "11001", "--protocol", "random", "--params", "{}"}, "random designs"},
		{[]string{"forward", "--family", "b3s", "--mask", "11001", "--bval", "x.bval", "--params", "{}"}, "--bvec"},
		{[]string{"forward", "--family", "nope", "--mask", "1"}, "--family"},
		{[]string{"simulate", "--family", "lingauss-k6", "--n", "3"}, "--out"},
		{[]string{"simulate", "--family", "lingauss-k6", "--n", "0", "--out", filepath.Join(dir, "x")}, "--n"},
		{[]string{"simulate", "--family", "lingauss-k6", "--n", "3", "--lambda", "1.5", "--out", filepath.Join(dir, "x")}, "--lambda"},
		{[]string{"simulate", "--family", "lingauss-k6", "--n", "3", "--protocol", "ukb", "--out", filepath.Join(dir, "x")}, "--protocol"},
		{[]string{"simulate", "--family", "b3s", "--n", "3", "--protocol", filepath.Join(dir, "missing"), "--out", filepath.Join(dir, "x")}, "missing"},
		{[]string{"simulate", "--family", "lingauss-k6", "--n", "3", "--out", filepath.Join(dir, "no", "such", "x")}, "--out"},
		{[]string{"families", "extra"}, "unexpected"},
	}
	for _, c := range cases {
		code, _, errs := prism(c.args...)
		if code == 0 {
			t.Errorf("%v: exit 0", c.args)
			continue
		}
		if !strings.Contains(errs, c.want) {
			t.Errorf("%v: error %q does not mention %q", c.args, errs, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("a failed simulate left its output file")
	}
	for _, cmd := range []string{"families", "simulate", "forward"} {
		if code, _, _ := prism(cmd, "-h"); code != 0 {
			t.Errorf("%s -h: exit %d", cmd, code)
		}
	}
}
