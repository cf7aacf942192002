package engine

import (
	"fmt"
	"strconv"
	"strings"
)

// Tensor is a dense row-major float32 array with an optional gradient.
//
// Data holds the values and has exactly Size() elements. Grad, when the
// tensor requires a gradient, has the same length and receives ∂L/∂Data
// during Graph.Backward; otherwise it is nil (or ignored for a frozen
// parameter). Tensors made by a Graph belong to it and are recycled at
// Graph.Reset; parameter tensors belong to a ParamStore.
type Tensor struct {
	Name  string // parameter name; empty for graph intermediates
	Shape []int
	Data  []float32
	Grad  []float32

	requiresGrad bool
	node         int // 1 + index of the tape node that produced it; 0 for leaves
}

// NewTensor returns a standalone tensor (not owned by any graph) with the
// given shape, zero-filled, without gradient.
func NewTensor(shape ...int) *Tensor {
	return &Tensor{Shape: append([]int(nil), shape...), Data: make([]float32, numel(shape))}
}

// Size is the number of elements.
func (t *Tensor) Size() int { return len(t.Data) }

// Rank is the number of axes.
func (t *Tensor) Rank() int { return len(t.Shape) }

// Dim returns the size of axis i; negative i counts from the end.
func (t *Tensor) Dim(i int) int {
	if i < 0 {
		i += len(t.Shape)
	}
	return t.Shape[i]
}

// Rows is the product of all axes but the last: the number of rows when the
// tensor is viewed as a matrix [Rows, Cols].
func (t *Tensor) Rows() int {
	if len(t.Shape) == 0 {
		return 1
	}
	return numel(t.Shape[:len(t.Shape)-1])
}

// Cols is the size of the last axis (1 for a scalar).
func (t *Tensor) Cols() int {
	if len(t.Shape) == 0 {
		return 1
	}
	return t.Shape[len(t.Shape)-1]
}

// RequiresGrad reports whether backward propagates into this tensor.
func (t *Tensor) RequiresGrad() bool { return t.requiresGrad }

// SetRequiresGrad turns gradient propagation into a leaf tensor on or off.
// Turning it on allocates Grad if needed. It is meant for parameters (e.g.
// freezing the weights while taking vector–Jacobian products with respect to
// inputs only); graph intermediates inherit the flag from their inputs.
func (t *Tensor) SetRequiresGrad(on bool) {
	if t.node != 0 {
		panic("engine: SetRequiresGrad on a non-leaf tensor")
	}
	t.requiresGrad = on
	if on && len(t.Grad) != len(t.Data) {
		t.Grad = make([]float32, len(t.Data))
	}
}

// Item returns the single value of a one-element tensor.
func (t *Tensor) Item() float32 {
	if len(t.Data) != 1 {
		panic(fmt.Sprintf("engine: Item on tensor of shape %v", t.Shape))
	}
	return t.Data[0]
}

func (t *Tensor) String() string {
	var b strings.Builder
	if t.Name != "" {
		b.WriteString(t.Name)
		b.WriteByte(' ')
	}
	fmt.Fprintf(&b, "%v", t.Shape)
	return b.String()
}

// needsGrad reports whether backward must compute a gradient for t.
func (t *Tensor) needsGrad() bool { return t != nil && t.requiresGrad }

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			panic("engine: negative dimension in shape " + shapeString(shape))
		}
		n *= d
	}
	return n
}

// shapeString formats a shape like fmt's %v without letting the slice
// escape, so that variadic shape arguments stay on the caller's stack.
func shapeString(s []int) string {
	b := []byte{'['}
	for i, d := range s {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, int64(d), 10)
	}
	return string(append(b, ']'))
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
