package family

// Info describes a family: its size, shared parameters and components
// (`prism families --json` prints one per family).
type Info struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	C           int             `json:"C"`
	Base        int             `json:"base_components"`
	Noise       int             `json:"noise_components"`
	DMax        int             `json:"d_max"`
	ModelSpace  string          `json:"model_space"` // exact decimal integer
	Shared      []string        `json:"shared,omitempty"`
	Simplex     []int           `json:"simplex,omitempty"`
	Components  []ComponentInfo `json:"components"`
}

// ComponentInfo describes one component of a family.
type ComponentInfo struct {
	Index  int      `json:"index"`
	Name   string   `json:"name"`
	Kind   string   `json:"kind"`
	Latent int      `json:"latent"`
	Params []string `json:"params"`
}

// Describe returns the description of family f.
func Describe(f Family) Info {
	base, noise := Counts(f)
	l := f.Layout()
	info := Info{
		Name:        f.Name(),
		Description: f.Description(),
		C:           len(f.Components()),
		Base:        base,
		Noise:       noise,
		DMax:        l.DMax,
		ModelSpace:  ModelSpaceSize(f).String(),
		Simplex:     l.Simplex,
	}
	for _, p := range l.Shared {
		info.Shared = append(info.Shared, p.Name)
	}
	for i, c := range f.Components() {
		ci := ComponentInfo{Index: i, Name: c.Name, Kind: c.Kind.String(), Latent: c.Latent, Params: []string{}}
		for _, p := range c.Params {
			ci.Params = append(ci.Params, p.Name)
		}
		info.Components = append(info.Components, ci)
	}
	return info
}
