package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// expr is a compiled arithmetic expression of the built-in simulator
// (docs/spec.md, "Expressions"): numbers, variables, + − * / ^ (right
// associative; a small non-negative integer exponent is evaluated by
// repeated multiplication, others by math.Pow), unary minus, parentheses
// and the functions sin, cos, tan, exp, log, sqrt, abs, tanh. Variables
// are resolved to slots of an environment slice when the expression is
// compiled, so evaluation does no map look-ups and no allocation.
type expr interface {
	eval(env []float64) float64
}

type (
	num   float64
	slot  int
	neg   struct{ a expr }
	binop struct {
		op   byte
		a, b expr
	}
	intPow struct {
		a expr
		n int
	}
	call struct {
		fn func(float64) float64
		a  expr
	}
)

func (n num) eval([]float64) float64      { return float64(n) }
func (s slot) eval(env []float64) float64 { return env[s] }
func (n neg) eval(env []float64) float64  { return -n.a.eval(env) }
func (c call) eval(env []float64) float64 { return c.fn(c.a.eval(env)) }

func (b binop) eval(env []float64) float64 {
	x, y := b.a.eval(env), b.b.eval(env)
	switch b.op {
	case '+':
		return x + y
	case '-':
		return x - y
	case '*':
		return x * y
	case '/':
		return x / y
	}
	return math.Pow(x, y)
}

func (p intPow) eval(env []float64) float64 {
	x := p.a.eval(env)
	v := 1.0
	for i := 0; i < p.n; i++ {
		if i == 0 {
			v = x
		} else {
			v *= x
		}
	}
	return v
}

var functions = map[string]func(float64) float64{
	"sin": math.Sin, "cos": math.Cos, "tan": math.Tan, "exp": math.Exp,
	"log": math.Log, "sqrt": math.Sqrt, "abs": math.Abs, "tanh": math.Tanh,
}

// parser is a recursive-descent parser over the expression text.
type parser struct {
	src  string
	pos  int
	vars map[string]int // variable name → environment slot
	used map[string]bool
}

// compile parses src with the given variables (name → slot).
func compile(src string, vars map[string]int) (expr, map[string]bool, error) {
	p := &parser{src: src, vars: vars, used: map[string]bool{}}
	e, err := p.sum()
	if err == nil {
		p.skip()
		if p.pos < len(p.src) {
			err = fmt.Errorf("unexpected %q at offset %d", p.src[p.pos:], p.pos)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("expression %q: %w", src, err)
	}
	return e, p.used, nil
}

func (p *parser) skip() {
	for p.pos < len(p.src) && p.src[p.pos] == ' ' {
		p.pos++
	}
}

func (p *parser) peek() byte {
	p.skip()
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

// sum := product { ("+"|"-") product }
func (p *parser) sum() (expr, error) {
	a, err := p.product()
	if err != nil {
		return nil, err
	}
	for {
		op := p.peek()
		if op != '+' && op != '-' {
			return a, nil
		}
		p.pos++
		b, err := p.product()
		if err != nil {
			return nil, err
		}
		a = binop{op, a, b}
	}
}

// product := unary { ("*"|"/") unary }
func (p *parser) product() (expr, error) {
	a, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		op := p.peek()
		if op != '*' && op != '/' {
			return a, nil
		}
		p.pos++
		b, err := p.unary()
		if err != nil {
			return nil, err
		}
		a = binop{op, a, b}
	}
}

// unary := "-" unary | power. A minus before a number literal folds into
// the literal (so "-0.5*x" is (−0.5)·x).
func (p *parser) unary() (expr, error) {
	if p.peek() == '-' {
		p.pos++
		a, err := p.unary()
		if err != nil {
			return nil, err
		}
		if n, ok := a.(num); ok {
			return -n, nil
		}
		return neg{a}, nil
	}
	return p.power()
}

// power := atom [ "^" unary ]
func (p *parser) power() (expr, error) {
	a, err := p.atom()
	if err != nil {
		return nil, err
	}
	if p.peek() != '^' {
		return a, nil
	}
	p.pos++
	b, err := p.unary()
	if err != nil {
		return nil, err
	}
	if n, ok := b.(num); ok && n >= 1 && n <= 16 && n == num(math.Trunc(float64(n))) {
		return intPow{a, int(n)}, nil
	}
	return binop{'^', a, b}, nil
}

// atom := number | name | name "(" sum ")" | "(" sum ")"
func (p *parser) atom() (expr, error) {
	c := p.peek()
	switch {
	case c == '(':
		p.pos++
		e, err := p.sum()
		if err != nil {
			return nil, err
		}
		if p.peek() != ')' {
			return nil, fmt.Errorf("missing ')' at offset %d", p.pos)
		}
		p.pos++
		return e, nil
	case c >= '0' && c <= '9' || c == '.':
		start := p.pos
		for p.pos < len(p.src) && (isDigit(p.src[p.pos]) || p.src[p.pos] == '.' ||
			(p.src[p.pos] == 'e' || p.src[p.pos] == 'E') ||
			((p.src[p.pos] == '-' || p.src[p.pos] == '+') && p.pos > start && (p.src[p.pos-1] == 'e' || p.src[p.pos-1] == 'E'))) {
			p.pos++
		}
		v, err := strconv.ParseFloat(p.src[start:p.pos], 64)
		if err != nil {
			return nil, fmt.Errorf("bad number %q", p.src[start:p.pos])
		}
		return num(v), nil
	case c == '_' || unicode.IsLetter(rune(c)):
		start := p.pos
		for p.pos < len(p.src) && (p.src[p.pos] == '_' || isDigit(p.src[p.pos]) || unicode.IsLetter(rune(p.src[p.pos]))) {
			p.pos++
		}
		name := p.src[start:p.pos]
		if p.peek() == '(' {
			fn, ok := functions[name]
			if !ok {
				return nil, fmt.Errorf("unknown function %q (known: sin cos tan exp log sqrt abs tanh)", name)
			}
			a, err := p.atom()
			if err != nil {
				return nil, err
			}
			return call{fn, a}, nil
		}
		if name == "pi" {
			return num(math.Pi), nil
		}
		s, ok := p.vars[name]
		if !ok {
			known := make([]string, 0, len(p.vars))
			for v := range p.vars {
				known = append(known, v)
			}
			return nil, fmt.Errorf("unknown variable %q (known here: %s)", name, strings.Join(sorted(known), " "))
		}
		p.used[name] = true
		return slot(s), nil
	case c == 0:
		return nil, fmt.Errorf("unexpected end")
	}
	return nil, fmt.Errorf("unexpected %q at offset %d", c, p.pos)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
