package family_test

import (
	"testing"

	"github.com/prismsbi/prism/family"
	_ "github.com/prismsbi/prism/family/dmri"
)

func TestComponentClassesAndSignature(t *testing.T) {
	f, err := family.Lookup("bszt")
	if err != nil {
		t.Fatal(err)
	}
	cl := family.ComponentClasses(f)
	want := []string{"Ball", "Stick", "Zeppelin", "Tensor", "GaussianNoise", "RicianNoise"}
	if len(cl) != len(want) {
		t.Fatalf("%d classes %+v, want %v", len(cl), cl, want)
	}
	for i, c := range cl {
		if c.Name != want[i] || c.Noise != (i >= 4) {
			t.Errorf("class %d: %+v, want %s", i, c, want[i])
		}
	}
	if n := len(cl[1].Components); n != 3 || cl[1].Components[0] != 1 {
		t.Errorf("Stick class %v, want components 1, 2, 3", cl[1].Components)
	}
	m := make([]bool, 12)
	m[0], m[2], m[3], m[7], m[10] = true, true, true, true, true
	if s := family.Signature(m, cl); s != "Ball+2Stick+Tensor" {
		t.Errorf("signature %q, want Ball+2Stick+Tensor", s)
	}
	if s := family.Signature(make([]bool, 12), cl); s != "none" {
		t.Errorf("empty signature %q, want none", s)
	}
}
