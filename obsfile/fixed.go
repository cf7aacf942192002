package obsfile

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/prismsbi/prism/data"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
)

// FixedDesign returns the fixed design of a grid family (its single
// training design), the grid on which observations are read.
func FixedDesign(f family.Family) (family.Design, error) {
	ds, err := f.Designs("")
	if err != nil {
		return family.Design{}, fmt.Errorf("obsfile: %w", err)
	}
	fixed, ok := ds.(family.FixedDesign)
	if !ok {
		return family.Design{}, fmt.Errorf("obsfile: family %s has no fixed design", f.Name())
	}
	return family.Design(fixed), nil
}

// ParseOne reads one observation on f's fixed design: a JSON
// object {"x": […]} (a `prism simulate` line, whose "mask" is returned as
// the truth) or one CSV row of numbers. name labels errors.
func ParseOne(name string, b []byte, f family.Family) (posterior.Observation, []bool, error) {
	d, err := FixedDesign(f)
	if err != nil {
		return posterior.Observation{}, nil, err
	}
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i]) // the first line
	}
	var x []float64
	var truth []bool
	if strings.HasPrefix(s, "{") {
		var line struct {
			X    []float64 `json:"x"`
			Mask []int     `json:"mask"`
		}
		if err := json.Unmarshal([]byte(s), &line); err != nil {
			return posterior.Observation{}, nil, fmt.Errorf("%s: %w", name, err)
		}
		x = line.X
		if len(line.Mask) == len(f.Components()) {
			truth = make([]bool, len(line.Mask))
			for k, v := range line.Mask {
				truth[k] = v != 0
			}
		}
	} else {
		for k, field := range strings.Split(s, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(field), 64)
			if err != nil {
				return posterior.Observation{}, nil, fmt.Errorf("%s: value %d: %w", name, k+1, err)
			}
			x = append(x, v)
		}
	}
	if len(x) != d.N {
		return posterior.Observation{}, nil, fmt.Errorf("%s: %d values, family %s wants %d (its grid)", name, len(x), f.Name(), d.N)
	}
	for k, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return posterior.Observation{}, nil, fmt.Errorf("%s: value %d is %v", name, k+1, v)
		}
	}
	return posterior.Observation{Design: d, X: x}, truth, nil
}

// BundledExample returns the observation bundled with prism for f's
// family (package data: symbolic-k15 and symbolic-k50) and its true mask.
func BundledExample(f family.Family) (posterior.Observation, []bool, error) {
	name := data.Example(f.Name())
	if name == "" {
		return posterior.Observation{}, nil, fmt.Errorf("obsfile: prism bundles no example observation for %s (it does for symbolic-k15 and symbolic-k50)", f.Name())
	}
	b, err := data.Files.ReadFile(name)
	if err != nil {
		return posterior.Observation{}, nil, fmt.Errorf("obsfile: %w", err)
	}
	return ParseOne(name, b, f)
}
