package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// ParamStore owns a network's learnable tensors under stable hierarchical
// names ("dec.layer3.attn.wqkv"). Iteration follows creation order, which
// the network fixes, so optimiser state and checkpoints line up.
type ParamStore struct {
	rng    *rand.Rand
	params []*Tensor
	index  map[string]int
}

// NewParamStore returns an empty store whose initialisers draw from rng
// (seed it for reproducible initial weights).
func NewParamStore(rng *rand.Rand) *ParamStore {
	return &ParamStore{rng: rng, index: make(map[string]int)}
}

// Init fills a new parameter's data given its shape.
type Init func(r *rand.Rand, shape []int, data []float32)

// New creates the parameter name with the given shape, initialised by init,
// with a gradient buffer. It panics if the name exists: names must be unique
// for checkpoints to be meaningful.
func (s *ParamStore) New(name string, init Init, shape ...int) *Tensor {
	if _, dup := s.index[name]; dup {
		panic(fmt.Sprintf("engine: parameter %q defined twice", name))
	}
	if name == "" || strings.Contains(name, "/") {
		panic(fmt.Sprintf("engine: invalid parameter name %q (empty or containing \"/\")", name))
	}
	n := numel(shape)
	t := &Tensor{Name: name, Shape: append([]int(nil), shape...), Data: make([]float32, n), Grad: make([]float32, n), requiresGrad: true}
	if init != nil {
		init(s.rng, t.Shape, t.Data)
	}
	s.index[name] = len(s.params)
	s.params = append(s.params, t)
	return t
}

// Get returns the parameter called name, or nil.
func (s *ParamStore) Get(name string) *Tensor {
	if i, ok := s.index[name]; ok {
		return s.params[i]
	}
	return nil
}

// All returns the parameters in creation order. The slice is the store's
// own; do not modify it.
func (s *ParamStore) All() []*Tensor { return s.params }

// Len is the number of parameter tensors.
func (s *ParamStore) Len() int { return len(s.params) }

// NumValues is the total number of scalar parameters.
func (s *ParamStore) NumValues() int {
	n := 0
	for _, p := range s.params {
		n += p.Size()
	}
	return n
}

// ZeroGrad sets every parameter gradient to zero.
func (s *ParamStore) ZeroGrad() {
	for _, p := range s.params {
		clear(p.Grad)
	}
}

// SetRequiresGrad freezes (false) or unfreezes (true) every parameter; with
// frozen parameters, Backward computes gradients for Variable inputs only,
// which is what repeated vector–Jacobian products for a density need.
func (s *ParamStore) SetRequiresGrad(on bool) {
	for _, p := range s.params {
		p.SetRequiresGrad(on)
	}
}

// Scope returns a naming scope under prefix.
func (s *ParamStore) Scope(prefix string) Scope { return Scope{store: s, prefix: prefix} }

// Scope creates parameters whose names share a dotted prefix, so that layer
// code can say sc.New("wq", …) and get "dec.layer3.attn.wq".
type Scope struct {
	store  *ParamStore
	prefix string
}

// Sub returns the scope prefix.name.
func (sc Scope) Sub(name string) Scope { return Scope{store: sc.store, prefix: sc.join(name)} }

// Subf is Sub with a formatted name, e.g. sc.Subf("layer%d", i).
func (sc Scope) Subf(format string, args ...any) Scope { return sc.Sub(fmt.Sprintf(format, args...)) }

// New creates the parameter prefix.name (see ParamStore.New).
func (sc Scope) New(name string, init Init, shape ...int) *Tensor {
	return sc.store.New(sc.join(name), init, shape...)
}

// Name is the scope's prefix.
func (sc Scope) Name() string { return sc.prefix }

func (sc Scope) join(name string) string {
	if sc.prefix == "" {
		return name
	}
	return sc.prefix + "." + name
}

// ---------------------------------------------------------------------------
// Initialisers

// truncNormStd is the standard deviation of a standard normal truncated to
// [−2, 2]; dividing by it gives the truncated sample the intended variance
// (the constant 0.87962566103423978 of JAX/Haiku variance scaling).
const truncNormStd = 0.87962566103423978

// Zeros initialises to 0 (output heads, AdaLN modulation layers).
func Zeros(_ *rand.Rand, _ []int, data []float32) { clear(data) }

// Ones initialises to 1 (LayerNorm scales).
func Ones(_ *rand.Rand, _ []int, data []float32) {
	for i := range data {
		data[i] = 1
	}
}

// Normal returns an initialiser drawing N(0, std²).
func Normal(std float64) Init {
	return func(r *rand.Rand, _ []int, data []float32) {
		for i := range data {
			data[i] = float32(std * r.NormFloat64())
		}
	}
}

// FanIn is the fan-in of a weight of the given shape: the product of all
// axes but the last (a Linear weight is [in, out]); 1-D shapes use their
// length.
func FanIn(shape []int) int {
	if len(shape) <= 1 {
		return numel(shape)
	}
	return numel(shape[:len(shape)-1])
}

// VarianceScaling returns the truncated-normal fan-in variance-scaling
// initialiser: samples of N(0, 1) truncated to [−2, 2], scaled to standard
// deviation √(scale/fan_in) (with the 1/0.8796… correction for the
// truncation). scale 1 is LeCun normal; the reference transformer uses
// scale 2/num_layers for its kernels.
func VarianceScaling(scale float64) Init {
	return func(r *rand.Rand, shape []int, data []float32) {
		std := math.Sqrt(scale/float64(max(1, FanIn(shape)))) / truncNormStd
		for i := range data {
			data[i] = float32(std * truncatedNormal(r))
		}
	}
}

// truncatedNormal draws N(0, 1) conditioned on [−2, 2] by rejection
// (acceptance probability 0.954).
func truncatedNormal(r *rand.Rand) float64 {
	for {
		if z := r.NormFloat64(); z >= -2 && z <= 2 {
			return z
		}
	}
}
