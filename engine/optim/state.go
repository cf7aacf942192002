package optim

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/prismsbi/prism/engine/safetensors"
)

// Names of the optimiser state tensors (see docs/checkpoint-format.md).
const (
	// StepName holds the step count t as two exact float32 values
	// [t / 2^24, t mod 2^24] (float32 represents integers exactly only up
	// to 2^24).
	StepName = "optim/step"
	// MomentPrefix + parameter name holds RAdam's first moment m.
	MomentPrefix = "optim/m/"
	// SecondMomentPrefix + parameter name holds RAdam's second moment v.
	SecondMomentPrefix = "optim/v/"
	// EMAPrefix + parameter name holds the EMA shadow of the parameter.
	EMAPrefix = "ema/"
)

const stepRadix = 1 << 24

// State returns the optimiser state as named float32 tensors: the step count
// (StepName), and per parameter its moments and EMA shadow, in parameter
// order. Apart from the step tensor the data are views of the live state,
// valid until the next Step or Restore; write them out (or copy them) before
// stepping again.
func (o *Optimizer) State() []safetensors.Tensor {
	c := o.c
	out := make([]safetensors.Tensor, 0, 1+3*len(c.ts))
	out = append(out, safetensors.Tensor{
		Name:  StepName,
		Shape: []int{2},
		Data:  []float32{float32(c.step / stepRadix), float32(c.step % stepRadix)},
	})
	for _, t := range c.ts {
		out = append(out,
			safetensors.Tensor{Name: MomentPrefix + t.p.Name, Shape: t.p.Shape, Data: t.m},
			safetensors.Tensor{Name: SecondMomentPrefix + t.p.Name, Shape: t.p.Shape, Data: t.v},
			safetensors.Tensor{Name: EMAPrefix + t.p.Name, Shape: t.p.Shape, Data: t.ema},
		)
	}
	return out
}

func isStateName(name string) bool {
	return name == StepName || strings.HasPrefix(name, MomentPrefix) ||
		strings.HasPrefix(name, SecondMomentPrefix) || strings.HasPrefix(name, EMAPrefix)
}

// Restore loads optimiser state written by State, typically read back from a
// checkpoint. Tensors whose names are not optimiser state names (such as the
// parameters themselves) are ignored. Every expected tensor must be present
// with the parameter's exact shape and finite values (v ≥ 0), and no state
// tensor may name an unknown parameter. Restore checks everything before
// changing anything. It does not touch the parameter values.
func (o *Optimizer) Restore(tensors []safetensors.Tensor) error {
	c := o.c
	byName := make(map[string]*safetensors.Tensor)
	for i := range tensors {
		t := &tensors[i]
		if !isStateName(t.Name) {
			continue
		}
		if byName[t.Name] != nil {
			return fmt.Errorf("optim: restore: duplicate tensor %q", t.Name)
		}
		byName[t.Name] = t
	}
	st := byName[StepName]
	if st == nil {
		return fmt.Errorf("optim: restore: missing %q", StepName)
	}
	if !slices.Equal(st.Shape, []int{2}) || len(st.Data) != 2 {
		return fmt.Errorf("optim: restore: %q has shape %v, want [2]", StepName, st.Shape)
	}
	hi, lo := float64(st.Data[0]), float64(st.Data[1])
	if hi != math.Trunc(hi) || lo != math.Trunc(lo) || hi < 0 || lo < 0 || lo >= stepRadix || hi >= 1<<31 {
		return fmt.Errorf("optim: restore: %q = %v is not a valid step count", StepName, st.Data)
	}
	step := int64(hi)*stepRadix + int64(lo)
	used := 1

	type triple struct{ m, v, ema []float32 }
	found := make([]triple, len(c.ts))
	for i, t := range c.ts {
		var dst [3][]float32
		for k, prefix := range [3]string{MomentPrefix, SecondMomentPrefix, EMAPrefix} {
			name := prefix + t.p.Name
			s := byName[name]
			if s == nil {
				return fmt.Errorf("optim: restore: missing %q", name)
			}
			if !sameShape(s.Shape, t.p.Shape) || len(s.Data) != len(t.p.Value) {
				return fmt.Errorf("optim: restore: %q has shape %v, parameter has %v", name, s.Shape, t.p.Shape)
			}
			for j, x := range s.Data {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || (k == 1 && x < 0) {
					return fmt.Errorf("optim: restore: %q[%d] = %v is invalid", name, j, x)
				}
			}
			dst[k] = s.Data
			used++
		}
		found[i] = triple{dst[0], dst[1], dst[2]}
	}
	if used != len(byName) {
		for name := range byName {
			if !c.hasStateName(name) {
				return fmt.Errorf("optim: restore: state tensor %q matches no parameter", name)
			}
		}
	}
	for i, t := range c.ts {
		copy(t.m, found[i].m)
		copy(t.v, found[i].v)
		copy(t.ema, found[i].ema)
	}
	c.step = step
	return nil
}

func (c *core) hasStateName(name string) bool {
	if name == StepName {
		return true
	}
	for _, t := range c.ts {
		if name == MomentPrefix+t.p.Name || name == SecondMomentPrefix+t.p.Name || name == EMAPrefix+t.p.Name {
			return true
		}
	}
	return false
}

// sameShape compares shapes, treating nil and empty (scalar) alike.
func sameShape(a, b []int) bool { return len(a) == len(b) && slices.Equal(a, b) }
