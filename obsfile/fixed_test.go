package obsfile

import (
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
	_ "github.com/prismsbi/prism/family/lingauss"
	_ "github.com/prismsbi/prism/family/symbolic"
)

// TestParseOne: a CSV row and a JSON line on the fixed design of
// lingauss-k6 are read, and bad values are errors naming the input.
func TestParseOne(t *testing.T) {
	f, err := family.Lookup("lingauss-k6")
	if err != nil {
		t.Fatal(err)
	}
	d, err := FixedDesign(f)
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]string, d.N)
	for j := range vals {
		vals[j] = "0.5"
	}
	row := strings.Join(vals, ",")
	obs, truth, err := ParseOne("obs.csv", []byte(row+"\n"), f)
	if err != nil || len(obs.X) != d.N || truth != nil {
		t.Fatalf("CSV row: %v", err)
	}
	mask := "[" + strings.TrimSuffix(strings.Repeat("1,", len(f.Components())), ",") + "]"
	_, truth, err = ParseOne("obs.jsonl", []byte(`{"x":[`+row+`],"mask":`+mask+`}`), f)
	if err != nil || len(truth) != len(f.Components()) || !truth[0] {
		t.Fatalf("JSON line: %v %v", err, truth)
	}
	for _, c := range []struct{ body, want string }{
		{"1,2,3", "3 values"},
		{row[:len(row)-3] + "NaN", "is NaN"},
		{row[:len(row)-3] + "abc", "value"},
		{`{"x": [1, 2}`, "obs"},
	} {
		if _, _, err := ParseOne("obs", []byte(c.body), f); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "obs") {
			t.Errorf("%.20q: error %v, want one naming the file and %q", c.body, err, c.want)
		}
	}
}

// TestBundledExample: the bundled observation of symbolic-k15 and of
// symbolic-k50 parses on its family's grid with its true mask, and a
// family without one is an error naming it.
func TestBundledExample(t *testing.T) {
	for _, name := range []string{"symbolic-k15", "symbolic-k50"} {
		f, err := family.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		obs, truth, err := BundledExample(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if obs.Design.N != 1000 || len(obs.X) != 1000 || len(truth) != len(f.Components()) {
			t.Errorf("%s: %d points, %d values, %d-entry mask", name, obs.Design.N, len(obs.X), len(truth))
		}
	}
	f, err := family.Lookup("lingauss-k6")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := BundledExample(f); err == nil || !strings.Contains(err.Error(), "lingauss-k6") {
		t.Errorf("lingauss-k6: error %v, want one naming the family", err)
	}
}
