package family

import (
	"strconv"
	"strings"
)

// Class is a group of components of the same kind: those whose names are
// equal after removing trailing digits ("Stick1", "Stick2" → "Stick").
// Noise components form classes too (dMRI: GaussianNoise, RicianNoise).
// Components of one class are exchangeable in the dMRI families, so the
// number of active components per class (a model's signature, e.g.
// "Ball+2Stick+Tensor") is what the data can identify.
type Class struct {
	Name       string `json:"name"`
	Components []int  `json:"components"` // component indices in mask order
	Noise      bool   `json:"noise,omitempty"`
}

// ComponentClasses groups the components of f into classes, in order of
// first appearance.
func ComponentClasses(f Family) []Class {
	var out []Class
	pos := map[string]int{}
	for k, c := range f.Components() {
		name := strings.TrimRight(c.Name, "0123456789")
		i, ok := pos[name]
		if !ok {
			i = len(out)
			pos[name] = i
			out = append(out, Class{Name: name, Noise: c.Kind == Noise})
		}
		out[i].Components = append(out[i].Components, k)
	}
	return out
}

// Signature names the signal classes of mask m with their counts, e.g.
// "Ball+2Stick+Tensor" ("none" when no signal class is active); noise
// classes are left out.
func Signature(m []bool, classes []Class) string {
	var parts []string
	for _, cl := range classes {
		if cl.Noise {
			continue
		}
		n := 0
		for _, k := range cl.Components {
			if m[k] {
				n++
			}
		}
		switch {
		case n == 1:
			parts = append(parts, cl.Name)
		case n > 1:
			parts = append(parts, strconv.Itoa(n)+cl.Name)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}
