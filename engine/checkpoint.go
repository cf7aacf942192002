package engine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/prismsbi/prism/engine/optim"
	"github.com/prismsbi/prism/engine/safetensors"
)

// OptimParams returns the parameters as the optimiser's plain-slice view
// (sharing memory with the store), in creation order.
func (s *ParamStore) OptimParams() []optim.Param {
	out := make([]optim.Param, len(s.params))
	for i, p := range s.params {
		out[i] = optim.Param{Name: p.Name, Shape: p.Shape, Value: p.Data, Grad: p.Grad}
	}
	return out
}

// Tensors returns the parameter values as safetensors tensors (views of the
// store's data), in creation order.
func (s *ParamStore) Tensors() []safetensors.Tensor {
	out := make([]safetensors.Tensor, len(s.params))
	for i, p := range s.params {
		out[i] = safetensors.Tensor{Name: p.Name, Shape: p.Shape, Data: p.Data}
	}
	return out
}

// Assign copies values from ts into the store: the tensor named prefix+name
// goes to parameter name. Every parameter must be present with its exact
// shape, and every tensor named prefix+x with x free of "/" must be a
// parameter; names containing "/" after the prefix belong to other
// namespaces (optimiser state such as "optim/m/…", "ema/…") and are skipped.
// Nothing is modified unless everything matches; the error lists every
// problem.
func (s *ParamStore) Assign(ts []safetensors.Tensor, prefix string) error {
	byName := make(map[string]*safetensors.Tensor, len(ts))
	var problems []string
	for i := range ts {
		name, ok := strings.CutPrefix(ts[i].Name, prefix)
		if !ok || strings.Contains(name, "/") {
			continue
		}
		byName[name] = &ts[i]
		if s.Get(name) == nil {
			problems = append(problems, fmt.Sprintf("unknown parameter %q", ts[i].Name))
		}
	}
	for _, p := range s.params {
		t, ok := byName[p.Name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("missing parameter %q %v", prefix+p.Name, p.Shape))
		case !sameShape(t.Shape, p.Shape):
			problems = append(problems, fmt.Sprintf("parameter %q has shape %v in the checkpoint, the network expects %v", t.Name, t.Shape, p.Shape))
		case len(t.Data) != len(p.Data):
			problems = append(problems, fmt.Sprintf("parameter %q has %d values, want %d", t.Name, len(t.Data), len(p.Data)))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		if len(problems) > 10 {
			problems = append(problems[:10], fmt.Sprintf("and %d more", len(problems)-10))
		}
		return fmt.Errorf("engine: checkpoint does not match the network: %s", strings.Join(problems, "; "))
	}
	for _, p := range s.params {
		copy(p.Data, byName[p.Name].Data)
	}
	return nil
}
