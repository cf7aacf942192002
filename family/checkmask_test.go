package family_test

import (
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
	fdmri "github.com/prismsbi/prism/family/dmri"
	"github.com/prismsbi/prism/family/lingauss"
)

func TestCheckMask(t *testing.T) {
	lg := lingauss.New()
	b3s := fdmri.B3S()
	mask := func(f family.Family, s string) []bool {
		m, err := family.ParseMask(s, len(f.Components()))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	nl, nb := len(lg.Components()), len(b3s.Components())
	t.Logf("lingauss-k6 has %d components, b3s %d", nl, nb)
	for _, tc := range []struct {
		name string
		f    family.Family
		mask []bool
		want string // "" when the mask is a model
	}{
		{"lingauss: one base, the noise", lg, mask(lg, "1"+strings.Repeat("0", nl-2)+"1"), ""},
		{"lingauss: only the noise", lg, mask(lg, strings.Repeat("0", nl-1)+"1"), ""},
		{"lingauss: no noise model", lg, mask(lg, strings.Repeat("1", nl-1)+"0"), "0 noise components are on"},
		{"lingauss: all zero", lg, make([]bool, nl), "0 noise components are on"},
		{"lingauss: wrong length", lg, []bool{true}, "has 1 entries"},
		{"b3s: all zero", b3s, make([]bool, nb), "outside the support of the b3s family's model prior"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := family.CheckMask(tc.f, tc.mask)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), family.MaskString(tc.mask)) {
				t.Fatalf("err = %v, want one naming the mask and containing %q", err, tc.want)
			}
		})
	}
	// b3s requires at least one stick: the noise alone is outside.
	var noiseOnly []bool
	for _, c := range b3s.Components() {
		noiseOnly = append(noiseOnly, c.Kind == family.Noise)
	}
	// Keep one noise component only.
	seen := false
	for k, on := range noiseOnly {
		if on && seen {
			noiseOnly[k] = false
		}
		seen = seen || on
	}
	if err := family.CheckMask(b3s, noiseOnly); err == nil || !strings.Contains(err.Error(), "fewer than the prior's minimum") {
		t.Errorf("b3s noise only: err = %v", err)
	}
}
