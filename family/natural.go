package family

import "math"

// NaturalIndex lays the natural parameters of a family out in one flat
// vector, so that loops over many posterior samples read them by position
// instead of through the maps of Params:
//
//	[ fraction of each simplex component (Layout.Simplex order) |
//	  shared parameters (Layout.Shared order) |
//	  component 0's Params | component 1's Params | … ]
//
// A fraction of an inactive component is 0; a parameter of an inactive
// component is NaN. Look positions up once (Fraction, Shared, Param) and
// fill a vector per sample with Fill.
type NaturalIndex struct {
	fam    Family
	fast   NaturalWriter // nil: Fill goes through Family.Natural
	nFrac  int
	shared []string
	comp   [][]string // parameter names per component
	off    []int      // offset of each component's parameters
	n      int
}

// NaturalWriter is implemented by families that write the flat natural
// vector of NaturalIndex directly, without building Params maps. out has
// the length and layout of NaturalIndex; the implementation must write
// every entry.
type NaturalWriter interface {
	NaturalInto(theta []float64, mask []bool, out []float64)
}

// NewNaturalIndex returns the flat layout of f's natural parameters.
func NewNaturalIndex(f Family) *NaturalIndex {
	l := f.Layout()
	x := &NaturalIndex{fam: f, nFrac: len(l.Simplex)}
	x.fast, _ = f.(NaturalWriter)
	for _, p := range l.Shared {
		x.shared = append(x.shared, p.Name)
	}
	x.n = x.nFrac + len(x.shared)
	for _, c := range f.Components() {
		names := make([]string, len(c.Params))
		for i, p := range c.Params {
			names[i] = p.Name
		}
		x.comp = append(x.comp, names)
		x.off = append(x.off, x.n)
		x.n += len(names)
	}
	return x
}

// Len is the length of the flat vector.
func (x *NaturalIndex) Len() int { return x.n }

// Fraction returns the position of the fraction of simplex entry i (the
// component Layout.Simplex[i]).
func (x *NaturalIndex) Fraction(i int) int {
	if i < 0 || i >= x.nFrac {
		return -1
	}
	return i
}

// Shared returns the position of the shared parameter name, or −1.
func (x *NaturalIndex) Shared(name string) int {
	for i, s := range x.shared {
		if s == name {
			return x.nFrac + i
		}
	}
	return -1
}

// Param returns the position of parameter name of component k, or −1.
func (x *NaturalIndex) Param(k int, name string) int {
	if k < 0 || k >= len(x.comp) {
		return -1
	}
	for i, s := range x.comp[k] {
		if s == name {
			return x.off[k] + i
		}
	}
	return -1
}

// Fill writes the natural parameters of (θ, mask) into out (length Len).
// It allocates nothing when the family implements NaturalWriter.
func (x *NaturalIndex) Fill(theta []float64, mask []bool, out []float64) {
	if len(out) != x.n {
		panic("family: NaturalIndex.Fill: output has the wrong length")
	}
	if x.fast != nil {
		x.fast.NaturalInto(theta, mask, out)
		return
	}
	x.FillFromParams(x.fam.Natural(theta, mask), out)
}

// FillFromParams writes p into out in the flat layout (missing entries as
// for an inactive component: fractions 0, parameters NaN).
func (x *NaturalIndex) FillFromParams(p Params, out []float64) {
	for i := range x.nFrac {
		out[i] = 0
		if i < len(p.Fractions) {
			out[i] = p.Fractions[i]
		}
	}
	for i, s := range x.shared {
		v, ok := p.Shared[s]
		if !ok {
			v = math.NaN()
		}
		out[x.nFrac+i] = v
	}
	for k, names := range x.comp {
		vals := p.Components[k]
		for i, s := range names {
			v, ok := vals[s]
			if !ok {
				v = math.NaN()
			}
			out[x.off[k]+i] = v
		}
	}
}
