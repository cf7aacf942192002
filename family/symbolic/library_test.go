package symbolic

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
)

// paperLibraries are the rows of the paper's basis-library table
// (App. C.1, Tab. tab:basis_libraries), copied verbatim.
var paperLibraries = map[int]string{
	15:  "Linear, Linear, Quadratic, ShiftedSquare, Cubic, Sinusoidal, Cosinusoidal, ConstantWide, ConstantPositive, TanhRight, TanhLeft, GaussianBump, GaussianWide, RampUp, RampDown",
	30:  "Linear, Quadratic, ShiftedSquare, Cubic, Sinusoidal, Cosinusoidal, ConstantWide, ConstantPositive, TanhRight, TanhLeft, TanhCentered, GaussianBump, GaussianWide, RampUp, RampDown, QuarticScaled, QuinticScaled, SinusoidalPhase, CosinusoidalPhase, ExponentialDecay, SaturatingExponential, Logarithmic, SquareRoot, Reciprocal, AbsoluteValue, InverseQuadratic, Lorentzian, Sigmoid, DampedSinusoidal, DampedCosinusoidal",
	50:  "Linear, Quadratic, ShiftedSquare, Cubic, Sinusoidal, Cosinusoidal, ConstantWide, ConstantPositive, TanhRight, TanhLeft, TanhCentered, GaussianBump, GaussianWide, RampUp, RampDown, QuarticScaled, QuinticScaled, SinusoidalPhase, CosinusoidalPhase, ExponentialDecay, SaturatingExponential, Logarithmic, SquareRoot, Reciprocal, AbsoluteValue, InverseQuadratic, Lorentzian, Sigmoid, DampedSinusoidal, DampedCosinusoidal, ExponentialGrowth, PowerLawDecay, ArctangentStep, HyperbolicSecant, SincDecay, AbsoluteSinusoidal, RectifiedLinear, Softplus, Gompertz, LinearFractional, SineSquared, TriangularBump, Linear, Quadratic, ShiftedSquare, Cubic, Sinusoidal, Cosinusoidal, ConstantWide, ConstantPositive",
	80:  "Linear, Quadratic, ShiftedSquare, Cubic, Sinusoidal, Cosinusoidal, ConstantWide, ConstantPositive, TanhRight, TanhLeft, TanhCentered, GaussianBump, GaussianWide, RampUp, RampDown, QuarticScaled, QuinticScaled, SinusoidalPhase, CosinusoidalPhase, ExponentialDecay, SaturatingExponential, Logarithmic, SquareRoot, Reciprocal, AbsoluteValue, InverseQuadratic, Lorentzian, Sigmoid, DampedSinusoidal, DampedCosinusoidal, ExponentialGrowth, PowerLawDecay, ArctangentStep, HyperbolicSecant, SincDecay, AbsoluteSinusoidal, RectifiedLinear, Softplus, Gompertz, LinearFractional, SineSquared, TriangularBump, Linear, Quadratic, ShiftedSquare, Cubic, Sinusoidal, Cosinusoidal, ConstantWide, ConstantPositive, TanhRight, TanhLeft, TanhCentered, GaussianBump, GaussianWide, RampUp, RampDown, QuarticScaled, QuinticScaled, SinusoidalPhase, CosinusoidalPhase, ExponentialDecay, SaturatingExponential, Logarithmic, SquareRoot, Reciprocal, AbsoluteValue, InverseQuadratic, Lorentzian, Sigmoid, DampedSinusoidal, DampedCosinusoidal, ExponentialGrowth, PowerLawDecay, ArctangentStep, HyperbolicSecant, SincDecay, AbsoluteSinusoidal, RectifiedLinear, Softplus",
	100: "Linear, Quadratic, ShiftedSquare, Cubic, Sinusoidal, Cosinusoidal, ConstantWide, ConstantPositive, TanhRight, TanhLeft, TanhCentered, GaussianBump, GaussianWide, RampUp, RampDown, QuarticScaled, QuinticScaled, SinusoidalPhase, CosinusoidalPhase, ExponentialDecay, SaturatingExponential, Logarithmic, SquareRoot, Reciprocal, AbsoluteValue, InverseQuadratic, Lorentzian, Sigmoid, DampedSinusoidal, DampedCosinusoidal, ExponentialGrowth, PowerLawDecay, ArctangentStep, HyperbolicSecant, SincDecay, AbsoluteSinusoidal, RectifiedLinear, Softplus, Gompertz, LinearFractional, SineSquared, TriangularBump, Linear, Quadratic, ShiftedSquare, Cubic, Sinusoidal, Cosinusoidal, ConstantWide, ConstantPositive, TanhRight, TanhLeft, TanhCentered, GaussianBump, GaussianWide, RampUp, RampDown, QuarticScaled, QuinticScaled, SinusoidalPhase, CosinusoidalPhase, ExponentialDecay, SaturatingExponential, Logarithmic, SquareRoot, Reciprocal, AbsoluteValue, InverseQuadratic, Lorentzian, Sigmoid, DampedSinusoidal, DampedCosinusoidal, ExponentialGrowth, PowerLawDecay, ArctangentStep, HyperbolicSecant, SincDecay, AbsoluteSinusoidal, RectifiedLinear, Softplus, Gompertz, LinearFractional, SineSquared, TriangularBump, Linear, Quadratic, ShiftedSquare, Cubic, Sinusoidal, Cosinusoidal, ConstantWide, ConstantPositive, TanhRight, TanhLeft, TanhCentered, GaussianBump, GaussianWide, RampUp, RampDown, QuarticScaled",
}

// Noise models of the paper: the five SBMI ones for K = 15 (App. C.1 text),
// all eight, in catalogue order (IDs 42–49), otherwise.
var (
	sbmiNoise = []string{"NoiseObserver", "NoiseIncreasing", "NoiseDecreasing", "NoiseQuadratic", "NoiseQuadraticDecreasing"}
	allNoise  = append(append([]string(nil), sbmiNoise...), "NoiseExponential", "NoiseSigmoid", "NoisePeaked")
)

// TestLibrariesMatchPaper checks component order, C = K + M and d_max
// against the paper's table and the reference implementation (d_max 28, 73, 115,
// 187, 223).
func TestLibrariesMatchPaper(t *testing.T) {
	dmax := map[int]int{15: 28, 30: 73, 50: 115, 80: 187, 100: 223}
	for k, row := range paperLibraries {
		f, err := family.Lookup("symbolic-k" + strconv.Itoa(k))
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Split(row, ", ")
		if len(want) != k {
			t.Fatalf("K=%d: paper row has %d names", k, len(want))
		}
		noise := allNoise
		if k == 15 {
			noise = sbmiNoise
		}
		want = append(want, noise...)
		comps := f.Components()
		if len(comps) != len(want) {
			t.Fatalf("K=%d: C = %d, want K+M = %d", k, len(comps), len(want))
		}
		for i, c := range comps {
			if c.Name != want[i] {
				t.Errorf("K=%d: component %d is %s, want %s", k, i, c.Name, want[i])
			}
			if wantKind := family.Base; i >= k {
				if c.Kind != family.Noise {
					t.Errorf("K=%d: component %d (%s) kind %v, want noise", k, i, c.Name, c.Kind)
				}
			} else if c.Kind != wantKind {
				t.Errorf("K=%d: component %d (%s) kind %v, want base", k, i, c.Name, c.Kind)
			}
		}
		if got := f.Layout().DMax; got != dmax[k] {
			t.Errorf("K=%d: d_max = %d, want %d", k, got, dmax[k])
		}
	}
}

// TestParameterCounts checks each function's number of parameters against
// the reference implementation's grouping.
func TestParameterCounts(t *testing.T) {
	one := "Linear Quadratic ShiftedSquare Cubic ConstantWide ConstantPositive QuarticScaled QuinticScaled " +
		"NoiseObserver NoiseIncreasing NoiseDecreasing NoiseQuadratic NoiseQuadraticDecreasing"
	two := "Sinusoidal Cosinusoidal TanhRight TanhLeft GaussianBump GaussianWide RampUp RampDown ExponentialDecay " +
		"SaturatingExponential Logarithmic SquareRoot Reciprocal AbsoluteValue ExponentialGrowth RectifiedLinear " +
		"LinearFractional SineSquared NoiseExponential"
	count := map[string]int{}
	for _, n := range strings.Fields(one) {
		count[n] = 1
	}
	for _, n := range strings.Fields(two) {
		count[n] = 2
	}
	for _, e := range catalogue {
		want, ok := count[e.Name]
		if !ok {
			want = 3
		}
		if len(e.Bounds) != want {
			t.Errorf("%s has %d parameters, want %d", e.Name, len(e.Bounds), want)
		}
	}
}

// TestPriorStrings spot-checks the component metadata against rows of the
// paper's catalogue table, including the non-integer and ±π bounds.
func TestPriorStrings(t *testing.T) {
	f, err := New(100)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"Linear":            {"U(-2,2)"},
		"Cubic":             {"U(-0.1,0.1)"},
		"SinusoidalPhase":   {"U(0,5)", "U(0.5,5)", "U(-pi,pi)"},
		"ExponentialGrowth": {"U(0,10)", "U(0.05,0.8)"},
		"Gompertz":          {"U(0,10)", "U(0.1,3)", "U(0.05,1.5)"},
		"NoisePeaked":       {"U(0,5)", "U(0,10)", "U(0.5,5)"},
		"NoiseQuadratic":    {"U(0.2,1)"},
	}
	found := 0
	for _, c := range f.Components() {
		w, ok := want[c.Name]
		if !ok {
			continue
		}
		found++
		if len(c.Params) != len(w) || c.Latent != len(w) {
			t.Errorf("%s: %d params, latent %d, want %d", c.Name, len(c.Params), c.Latent, len(w))
			continue
		}
		for i, p := range c.Params {
			if p.Name != paramNames[i] || p.Unit != "" || p.Prior != w[i] {
				t.Errorf("%s param %d = %+v, want {c%d, \"\", %s}", c.Name, i, p, i+1, w[i])
			}
		}
	}
	if found < len(want) {
		t.Errorf("found %d of the spot-checked components", found)
	}
}

func TestRegistry(t *testing.T) {
	names := family.Names()
	for _, k := range []int{15, 30, 50, 80, 100} {
		n := "symbolic-k" + strconv.Itoa(k)
		if !slices.Contains(names, n) {
			t.Errorf("%s not registered (have %v)", n, names)
		}
	}
	if _, err := New(0); err == nil {
		t.Error("New(0) succeeded")
	}
}
