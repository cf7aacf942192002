package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/prismsbi/prism/family"
)

// priorKind is one of the parameter priors a spec file can name.
type priorKind int

const (
	uniform priorKind = iota
	logUniform
	normal
	truncNormal
	sphereTheta // polar angle of a direction uniform on the sphere
	spherePhi   // its azimuth
)

// paramPrior maps one standard-normal latent z to one natural value. Every
// natural value of a spec family has its own latent, so a component's
// latent block and its natural values correspond one to one.
type paramPrior struct {
	kind       priorKind
	a, b, c, d float64 // uniform/log-uniform: a, b (log bounds for log-uniform); normal: mean a, sd b; truncated: also lo c, hi d
	pa, pb     float64 // truncated normal: Φ((lo−mean)/sd), Φ((hi−mean)/sd)
	text       string  // as written in the spec
}

// parsePrior reads "uniform(a, b)", "log_uniform(a, b)", "normal(mean, sd)",
// "truncated_normal(mean, sd, lo, hi)" or "sphere". A sphere prior returns
// two priors (polar angle, azimuth).
func parsePrior(s string) ([]paramPrior, error) {
	s = strings.TrimSpace(s)
	if s == "sphere" {
		return []paramPrior{{kind: sphereTheta, text: s}, {kind: spherePhi, text: s}}, nil
	}
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close != len(s)-1 {
		return nil, fmt.Errorf("prior %q: want NAME(ARGS) or sphere", s)
	}
	name := strings.TrimSpace(s[:open])
	var args []float64
	for _, a := range strings.Split(s[open+1:close], ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(a), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("prior %q: argument %q is not a finite number", s, strings.TrimSpace(a))
		}
		args = append(args, v)
	}
	want := map[string]int{"uniform": 2, "log_uniform": 2, "normal": 2, "truncated_normal": 4}
	n, ok := want[name]
	if !ok {
		return nil, fmt.Errorf("prior %q: unknown prior %q (known: uniform, log_uniform, normal, truncated_normal, sphere)", s, name)
	}
	if len(args) != n {
		return nil, fmt.Errorf("prior %q: %s takes %d arguments, got %d", s, name, n, len(args))
	}
	p := paramPrior{text: s}
	switch name {
	case "uniform":
		if !(args[0] < args[1]) {
			return nil, fmt.Errorf("prior %q: lower bound must be below upper bound", s)
		}
		p.kind, p.a, p.b = uniform, args[0], args[1]
	case "log_uniform":
		if !(args[0] > 0 && args[0] < args[1]) {
			return nil, fmt.Errorf("prior %q: bounds must satisfy 0 < lower < upper", s)
		}
		p.kind, p.a, p.b = logUniform, math.Log(args[0]), math.Log(args[1])
	case "normal":
		if !(args[1] > 0) {
			return nil, fmt.Errorf("prior %q: standard deviation must be positive", s)
		}
		p.kind, p.a, p.b = normal, args[0], args[1]
	case "truncated_normal":
		if !(args[1] > 0) || !(args[2] < args[3]) {
			return nil, fmt.Errorf("prior %q: want truncated_normal(mean, sd > 0, lo, hi > lo)", s)
		}
		p.kind, p.a, p.b, p.c, p.d = truncNormal, args[0], args[1], args[2], args[3]
		p.pa, p.pb = family.Phi((p.c-p.a)/p.b), family.Phi((p.d-p.a)/p.b)
		if !(p.pb-p.pa > 1e-12) {
			return nil, fmt.Errorf("prior %q: the interval holds almost no normal mass; use uniform", s)
		}
	}
	return []paramPrior{p}, nil
}

// natural maps a latent z ~ N(0,1) to the prior.
func (p *paramPrior) natural(z float64) float64 {
	switch p.kind {
	case uniform:
		return p.a + (p.b-p.a)*family.Phi(z)
	case logUniform:
		return math.Exp(p.a + (p.b-p.a)*family.Phi(z))
	case normal:
		return p.a + p.b*z
	case truncNormal:
		u := p.pa + (p.pb-p.pa)*family.Phi(z)
		return min(max(p.a+p.b*family.PhiInv(u), p.c), p.d)
	case sphereTheta:
		// cos θ uniform on [−1, 1].
		return math.Acos(1 - 2*family.Phi(z))
	default: // spherePhi
		return 2*math.Pi*family.Phi(z) - math.Pi
	}
}

// latent inverts natural; values outside the prior's support are errors.
func (p *paramPrior) latent(v float64) (float64, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("value %v is not finite", v)
	}
	outside := func(lo, hi float64) error {
		if v < lo || v > hi {
			return fmt.Errorf("value %g lies outside the support [%g, %g] of its prior %s", v, lo, hi, p.text)
		}
		return nil
	}
	switch p.kind {
	case uniform:
		if err := outside(p.a, p.b); err != nil {
			return 0, err
		}
		return family.PhiInv((v - p.a) / (p.b - p.a)), nil
	case logUniform:
		if err := outside(math.Exp(p.a), math.Exp(p.b)); err != nil {
			return 0, err
		}
		return family.PhiInv((math.Log(v) - p.a) / (p.b - p.a)), nil
	case normal:
		return (v - p.a) / p.b, nil
	case truncNormal:
		if err := outside(p.c, p.d); err != nil {
			return 0, err
		}
		return family.PhiInv((family.Phi((v-p.a)/p.b) - p.pa) / (p.pb - p.pa)), nil
	case sphereTheta:
		if err := outside(0, math.Pi); err != nil {
			return 0, err
		}
		return family.PhiInv((1 - math.Cos(v)) / 2), nil
	default:
		if err := outside(-math.Pi, math.Pi); err != nil {
			return 0, err
		}
		return family.PhiInv((v + math.Pi) / (2 * math.Pi)), nil
	}
}

// quantile returns the natural value at cumulative probability u.
func (p *paramPrior) quantile(u float64) float64 { return p.natural(family.PhiInv(u)) }
