package symbolic

import (
	"fmt"
	"math"
)

// bound is a uniform prior U(Lo, Hi) on one natural parameter.
type bound struct{ Lo, Hi float64 }

// entry is one row of the paper's "Extended component and noise catalogue"
// (App. C.1, Tab. tab:extended_symbolic_components).
type entry struct {
	ID     int     // catalogue ID (0–41 base functions, 42–49 noise models)
	Name   string  // component name, e.g. "Linear"
	Token  string  // short token, e.g. "lin"
	Expr   string  // expression in x and c1, c2, c3
	Bounds []bound // uniform prior of c1, c2, c3 (in that order)
}

// Catalogue IDs of the base functions, as in the paper's table.
const (
	idLinear = iota
	idQuadratic
	idShiftedSquare
	idCubic
	idSinusoidal
	idCosinusoidal
	idConstantWide
	idConstantPositive
	idTanhRight
	idTanhLeft
	idGaussianBump
	idGaussianWide
	idRampUp
	idRampDown
	idQuarticScaled
	idQuinticScaled
	idSinusoidalPhase
	idCosinusoidalPhase
	idExponentialDecay
	idSaturatingExponential
	idLogarithmic
	idSquareRoot
	idReciprocal
	idAbsoluteValue
	idInverseQuadratic
	idLorentzian
	idSigmoid
	idDampedSinusoidal
	idDampedCosinusoidal
	idTanhCentered
	idExponentialGrowth
	idPowerLawDecay
	idArctangentStep
	idHyperbolicSecant
	idSincDecay
	idAbsoluteSinusoidal
	idRectifiedLinear
	idSoftplus
	idGompertz
	idLinearFractional
	idSineSquared
	idTriangularBump
	numBase // 42 unique base functions
)

// Catalogue IDs of the noise models.
const (
	idNoiseObserver = numBase + iota
	idNoiseIncreasing
	idNoiseDecreasing
	idNoiseQuadratic
	idNoiseQuadraticDecreasing
	idNoiseExponential
	idNoiseSigmoid
	idNoisePeaked
	numEntries // 50 catalogue entries
)

// catalogue lists every base function and noise model, indexed by ID. The
// priors are the paper's; all of them are uniform.
var catalogue = [numEntries]entry{
	{idLinear, "Linear", "lin", "c1*x", []bound{{-2, 2}}},
	{idQuadratic, "Quadratic", "quad", "c1*x*x", []bound{{-0.5, 0.5}}},
	{idShiftedSquare, "ShiftedSquare", "shift2", "(c1+x)*(c1+x)", []bound{{-5, 0}}},
	{idCubic, "Cubic", "cub", "c1*x*x*x", []bound{{-0.1, 0.1}}},
	{idSinusoidal, "Sinusoidal", "sin", "c1*sin(c2*x)", []bound{{0, 5}, {0.5, 5}}},
	{idCosinusoidal, "Cosinusoidal", "cos", "c1*cos(c2*x)", []bound{{0, 5}, {0.5, 5}}},
	{idConstantWide, "ConstantWide", "const_w", "c1", []bound{{-5, 5}}},
	{idConstantPositive, "ConstantPositive", "const_p", "c1", []bound{{0, 10}}},
	{idTanhRight, "TanhRight", "tanh_r", "c1*tanh(x-c2)", []bound{{1, 10}, {2, 8}}},
	{idTanhLeft, "TanhLeft", "tanh_l", "c1*tanh(-x+c2)", []bound{{1, 10}, {2, 8}}},
	{idGaussianBump, "GaussianBump", "gauss_b", "c1*exp(-(x-c2)^2)", []bound{{1, 10}, {2, 8}}},
	{idGaussianWide, "GaussianWide", "gauss_w", "c1*exp(-(x-c2)^2/8)", []bound{{1, 10}, {2, 8}}},
	{idRampUp, "RampUp", "ramp_u", "c1*(x if x>=c2 else 0)", []bound{{1, 5}, {2, 8}}},
	{idRampDown, "RampDown", "ramp_d", "c1*(c2-x if x<=c2 else 0)", []bound{{1, 5}, {2, 8}}},
	{idQuarticScaled, "QuarticScaled", "quart4", "c1*(x/10)^4", []bound{{-5, 5}}},
	{idQuinticScaled, "QuinticScaled", "quint5", "c1*(x/10)^5", []bound{{-5, 5}}},
	{idSinusoidalPhase, "SinusoidalPhase", "sin_ph", "c1*sin(c2*x+c3)", []bound{{0, 5}, {0.5, 5}, {-math.Pi, math.Pi}}},
	{idCosinusoidalPhase, "CosinusoidalPhase", "cos_ph", "c1*cos(c2*x+c3)", []bound{{0, 5}, {0.5, 5}, {-math.Pi, math.Pi}}},
	{idExponentialDecay, "ExponentialDecay", "exp_dec", "c1*exp(-c2*x)", []bound{{0, 10}, {0.1, 2}}},
	{idSaturatingExponential, "SaturatingExponential", "exp_sat", "c1*(1-exp(-c2*x))", []bound{{0, 10}, {0.1, 2}}},
	{idLogarithmic, "Logarithmic", "log", "c1*log(x+c2)", []bound{{-5, 5}, {0.1, 2}}},
	{idSquareRoot, "SquareRoot", "sqrt", "c1*sqrt(x+c2)", []bound{{-5, 5}, {0, 2}}},
	{idReciprocal, "Reciprocal", "recip", "c1/(x+c2)", []bound{{-10, 10}, {0.5, 3}}},
	{idAbsoluteValue, "AbsoluteValue", "abs", "c1*|x-c2|", []bound{{-5, 5}, {0, 10}}},
	{idInverseQuadratic, "InverseQuadratic", "invquad", "c1/(1+c2*(x-c3)^2)", []bound{{0, 10}, {0.1, 2}, {0, 10}}},
	{idLorentzian, "Lorentzian", "lorentz", "c1/(1+((x-c2)/c3)^2)", []bound{{0, 10}, {0, 10}, {0.5, 5}}},
	{idSigmoid, "Sigmoid", "sig", "c1/(1+exp(-c2*(x-c3)))", []bound{{0, 10}, {0.1, 5}, {0, 10}}},
	{idDampedSinusoidal, "DampedSinusoidal", "d_sin", "c1*exp(-c2*x)*sin(c3*x)", []bound{{0, 5}, {0.05, 1}, {0.5, 8}}},
	{idDampedCosinusoidal, "DampedCosinusoidal", "d_cos", "c1*exp(-c2*x)*cos(c3*x)", []bound{{0, 5}, {0.05, 1}, {0.5, 8}}},
	{idTanhCentered, "TanhCentered", "tanh_c", "c1*tanh(c2*(x-c3))", []bound{{-10, 10}, {0.1, 2}, {2, 8}}},
	{idExponentialGrowth, "ExponentialGrowth", "exp_grow", "c1*exp(c2*x)", []bound{{0, 10}, {0.05, 0.8}}},
	{idPowerLawDecay, "PowerLawDecay", "pow_dec", "c1/(x+c2)^c3", []bound{{0, 10}, {0.5, 5}, {0.5, 3}}},
	{idArctangentStep, "ArctangentStep", "atan", "c1*atan(c2*(x-c3))", []bound{{0, 10}, {0.1, 2}, {0, 10}}},
	{idHyperbolicSecant, "HyperbolicSecant", "sech", "c1*sech(c2*(x-c3))", []bound{{0, 8}, {0.1, 2}, {0, 10}}},
	{idSincDecay, "SincDecay", "sinc", "c1*sin(c2*x)/(x+c3)", []bound{{0, 5}, {0.5, 5}, {0.5, 5}}},
	{idAbsoluteSinusoidal, "AbsoluteSinusoidal", "abs_sin", "c1*|sin(c2*x+c3)|", []bound{{0, 5}, {0.5, 5}, {-math.Pi, math.Pi}}},
	{idRectifiedLinear, "RectifiedLinear", "relu", "c1*max(0, x-c2)", []bound{{0, 5}, {0, 8}}},
	{idSoftplus, "Softplus", "softplus", "c1*log(1+exp(c2*(x-c3)))/c2", []bound{{0, 5}, {0.1, 5}, {0, 10}}},
	{idGompertz, "Gompertz", "gomp", "c1*exp(-c2*exp(-c3*x))", []bound{{0, 10}, {0.1, 3}, {0.05, 1.5}}},
	{idLinearFractional, "LinearFractional", "linfrac", "c1*x/(1+c2*x)", []bound{{-5, 5}, {0.1, 2}}},
	{idSineSquared, "SineSquared", "sin2", "c1*sin(c2*x)^2", []bound{{0, 5}, {0.5, 5}}},
	{idTriangularBump, "TriangularBump", "tri", "c1*max(0, 1-|x-c2|/c3)", []bound{{0, 5}, {0.5, 5}, {0.5, 5}}},

	{idNoiseObserver, "NoiseObserver", "n_obs", "N(0,c1^2)", []bound{{0.1, 2}}},
	{idNoiseIncreasing, "NoiseIncreasing", "n_inc", "N(0,c1^2)*(x+1)", []bound{{0.5, 2}}},
	{idNoiseDecreasing, "NoiseDecreasing", "n_dec", "N(0,c1^2)*(11-x)", []bound{{0.5, 2}}},
	{idNoiseQuadratic, "NoiseQuadratic", "n_quad", "N(0,c1^2)*(x^2+1)", []bound{{0.2, 1}}},
	{idNoiseQuadraticDecreasing, "NoiseQuadraticDecreasing", "n_qdec", "N(0,c1^2)*(11-x^2)", []bound{{0.2, 1}}},
	{idNoiseExponential, "NoiseExponential", "n_exp", "N(0,c1^2)*exp(c2*x)", []bound{{0, 5}, {0.05, 0.5}}},
	{idNoiseSigmoid, "NoiseSigmoid", "n_sig", "N(0,c1^2)/(1+exp(-c2*(x-c3)))", []bound{{0, 5}, {0.1, 1}, {0, 10}}},
	{idNoisePeaked, "NoisePeaked", "n_peak", "N(0,c1^2)*exp(-(x-c2)^2/(c3+0.001))", []bound{{0, 5}, {0, 10}, {0.5, 5}}},
}

// paramNames are the natural parameter names, in latent order.
var paramNames = [3]string{"c1", "c2", "c3"}

// libraryCycle is the 42-function basis order of the paper's basis-library
// table (App. C.1, Tab. tab:basis_libraries) for K ≥ 30. It differs from the
// catalogue ID order only in TanhCentered (ID 29), which comes eleventh. The
// K = 30 library is its first 30 entries; K ≥ 50 repeat it cyclically.
var libraryCycle = [numBase]int{
	idLinear, idQuadratic, idShiftedSquare, idCubic, idSinusoidal,
	idCosinusoidal, idConstantWide, idConstantPositive, idTanhRight, idTanhLeft,
	idTanhCentered, idGaussianBump, idGaussianWide, idRampUp, idRampDown,
	idQuarticScaled, idQuinticScaled, idSinusoidalPhase, idCosinusoidalPhase,
	idExponentialDecay, idSaturatingExponential, idLogarithmic, idSquareRoot,
	idReciprocal, idAbsoluteValue, idInverseQuadratic, idLorentzian, idSigmoid,
	idDampedSinusoidal, idDampedCosinusoidal, idExponentialGrowth,
	idPowerLawDecay, idArctangentStep, idHyperbolicSecant, idSincDecay,
	idAbsoluteSinusoidal, idRectifiedLinear, idSoftplus, idGompertz,
	idLinearFractional, idSineSquared, idTriangularBump,
}

// libraryK15 is the SBMI setting of the paper (K = 15), which starts with two
// copies of Linear and stops at RampDown.
var libraryK15 = []int{
	idLinear, idLinear, idQuadratic, idShiftedSquare, idCubic, idSinusoidal,
	idCosinusoidal, idConstantWide, idConstantPositive, idTanhRight, idTanhLeft,
	idGaussianBump, idGaussianWide, idRampUp, idRampDown,
}

// Library sizes K for which families are registered.
var librarySizes = []int{15, 30, 50, 80, 100}

// library returns the catalogue IDs of the K base functions followed by the
// noise models of the setting: the five SBMI noise models for K = 15, all
// eight otherwise.
func library(k int) (base, noise []int, err error) {
	switch {
	case k == 15:
		base = append([]int(nil), libraryK15...)
		noise = []int{idNoiseObserver, idNoiseIncreasing, idNoiseDecreasing,
			idNoiseQuadratic, idNoiseQuadraticDecreasing}
	case k >= 1:
		base = make([]int, k)
		for i := range base {
			base[i] = libraryCycle[i%numBase]
		}
		noise = make([]int, 0, numEntries-numBase)
		for id := numBase; id < numEntries; id++ {
			noise = append(noise, id)
		}
	default:
		return nil, nil, fmt.Errorf("symbolic: library size K=%d must be positive", k)
	}
	return base, noise, nil
}

// priorString writes U(a,b) with π spelled "pi".
func priorString(b bound) string {
	f := func(v float64) string {
		switch v {
		case math.Pi:
			return "pi"
		case -math.Pi:
			return "-pi"
		}
		return fmt.Sprintf("%g", v)
	}
	return "U(" + f(b.Lo) + "," + f(b.Hi) + ")"
}
