package family

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
)

// MarshalJSON writes p in the layout documented in docs/families.md, with
// components in numeric index order (encoding/json would order the keys as
// strings: "0", "1", "10", "2", …) and parameter names sorted. Non-finite
// values are errors, as in encoding/json.
func (p Params) MarshalJSON() ([]byte, error) {
	b := []byte(`{"components":{`)
	idx := make([]int, 0, len(p.Components))
	for k := range p.Components {
		idx = append(idx, k)
	}
	sort.Ints(idx)
	var err error
	for i, k := range idx {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendInt(b, int64(k), 10)
		b = append(b, `":`...)
		if b, err = appendValues(b, p.Components[k]); err != nil {
			return nil, fmt.Errorf("family: component %d: %w", k, err)
		}
	}
	b = append(b, '}')
	if len(p.Shared) > 0 {
		b = append(b, `,"shared":`...)
		if b, err = appendValues(b, p.Shared); err != nil {
			return nil, fmt.Errorf("family: shared parameters: %w", err)
		}
	}
	if len(p.Fractions) > 0 {
		b = append(b, `,"fractions":[`...)
		for i, v := range p.Fractions {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendNumber(b, v); err != nil {
				return nil, fmt.Errorf("family: fraction %d: %w", i, err)
			}
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// appendValues appends a JSON object of named values, names sorted.
func appendValues(b []byte, m map[string]float64) ([]byte, error) {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	b = append(b, '{')
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		q, err := json.Marshal(n)
		if err != nil {
			return nil, err
		}
		b = append(append(b, q...), ':')
		if b, err = appendNumber(b, m[n]); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
	}
	return append(b, '}'), nil
}

// appendNumber appends v in the shortest form that parses back to v.
func appendNumber(b []byte, v float64) ([]byte, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return b, fmt.Errorf("value %v cannot be written as JSON", v)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64), nil
}
