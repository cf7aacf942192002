package plot

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// componentNames joins n made-up component names of four characters
// each ("C01+C02+…"), the shape of a large symbolic model's label.
func componentNames(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("C%02d", i+1)
	}
	return strings.Join(parts, "+")
}

// TestClipLines: a cut label keeps whole lines and counts every dropped
// component, so kept plus counted is the whole model.
func TestClipLines(t *testing.T) {
	lines := wrapLabel(componentNames(20), 34) // 8 names (32 characters) a line: 8, 8, 4
	if len(lines) != 3 {
		t.Fatalf("wrapLabel: %d lines %q, want 3", len(lines), lines)
	}
	for n, want := range map[int]string{1: "… +20 more", 2: "… +12 more"} {
		got := clipLines(lines, n)
		if len(got) != n || got[n-1] != want {
			t.Errorf("clipLines(%d) = %q, want %d lines ending %q", n, got, n, want)
		}
	}
	if got := clipLines(lines, 3); strings.Join(got, "") != componentNames(20) {
		t.Errorf("clipLines(3) changed a label that fits: %q", got)
	}
}

// TestLambdaSweepKeyFits: six entries (five models of 40 components and
// "other") of five lines each need about 350 points of key; on a panel 200
// points tall the labels are cut until the key fits above its bottom, and
// on a tall one nothing is cut.
func TestLambdaSweepKeyFits(t *testing.T) {
	s := Sweep{Lambda: []float64{0, 1}}
	for i := range 5 {
		s.Models = append(s.Models, Series{Name: fmt.Sprintf("M%d+", i) + componentNames(40), Values: []float64{0.1, 0.1}})
	}
	_, key, err := sweepModels(s, "λ")
	if err != nil {
		t.Fatal(err)
	}
	if len(key.lines) != 6 {
		t.Fatalf("key has %d entries, want 6", len(key.lines))
	}
	height := func(h vg.Length) vg.Length {
		c := draw.New(vgimg.New(vg.Points(400), h))
		l := key.legend(c)
		r := l.Rectangle(c)
		if r.Min.Y < c.Min.Y {
			t.Errorf("canvas %v tall: key runs %v below it", h, c.Min.Y-r.Min.Y)
		}
		return r.Max.Y - r.Min.Y
	}
	full, short := height(vg.Points(3000)), height(vg.Points(200))
	if full < vg.Points(300) || short > vg.Points(200) || short < vg.Points(100) {
		t.Errorf("key heights %v (uncut) and %v (on 200 points), want > 300 and in [100, 200]", full, short)
	}
}

// TestLambdaSweepFoldsSmallModels: a model whose probability never reaches
// minShownProb gets no area of its own (it would be a hairline); its mass
// is drawn as part of "other", whose key entry counts it.
func TestLambdaSweepFoldsSmallModels(t *testing.T) {
	s := Sweep{Lambda: []float64{0, 0.5, 1}, Models: []Series{
		{Name: "big", Values: []float64{0.5, 0.5, 0.5}},
		{Name: "tiny", Values: []float64{0.005, 0.009, 0.002}},
		{Name: "last", Values: []float64{0.3, 0.2, 0.1}},
	}}
	_, key, err := sweepModels(s, "λ")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"other (incl. 1 top model, < 1 %)", "last", "big"}
	var names []string
	for _, lines := range key.lines {
		names = append(names, strings.Join(lines, ""))
	}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("key %q, want %q", names, want)
	}
	var buf bytes.Buffer
	if err := WriteLambdaSweep(&buf, s, Options{}); err != nil {
		t.Fatal(err)
	}
	img := decode(t, buf.Bytes(), 700, 500)
	// "last" takes the second colour, not the third: no colour is used up
	// by a model that is not drawn.
	if n := find(img, img.Bounds(), over(withAlpha(seriesColor(1), 0xc0)), 3).n; n < 1000 {
		t.Errorf("second layer colour: %d pixels", n)
	}
	if n := find(img, img.Bounds(), over(withAlpha(seriesColor(2), 0xc0)), 3).n; n != 0 {
		t.Errorf("third layer colour: %d pixels, want none", n)
	}
}
