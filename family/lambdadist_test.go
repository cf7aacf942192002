package family

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestLambdaDistUniformStream: the zero value draws λ with exactly one
// r.Float64(), so every simulation stream of a run without lambda_train is
// what it was before the option existed (the goldens depend on it).
func TestLambdaDistUniformStream(t *testing.T) {
	a, b := rand.New(rand.NewPCG(5, 6)), rand.New(rand.NewPCG(5, 6))
	for _, d := range []LambdaDist{{}, {Mix: 0.7, Power: 1}} {
		for range 100 {
			if got, want := d.Sample(a), b.Float64(); got != want {
				t.Fatalf("%+v: λ %v, want the stream's %v", d, got, want)
			}
		}
	}
}

// TestLambdaDistMoments: λ ~ (1−m)·U(0, 1) + m·Beta(a, 1) has mean
// (1−m)/2 + m·a/(a+1) and P(λ > c) = 1 − CDF(c). Monte Carlo with N = 2·10⁵
// draws: the standard error of the mean is ≤ 0.29/√N = 6.5·10⁻⁴ and of a
// probability ≤ 0.5/√N = 1.1·10⁻³; 5 standard errors allowed.
func TestLambdaDistMoments(t *testing.T) {
	const n = 200000
	for _, d := range []LambdaDist{{Mix: 0.75, Power: 4}, {Mix: 1, Power: 2.5}, {Mix: 0.3, Power: 8}} {
		r := rand.New(rand.NewPCG(1, 2))
		sum, above := 0.0, 0
		for range n {
			l := d.Sample(r)
			if l < 0 || l > 1 {
				t.Fatalf("%+v: λ = %v outside [0, 1]", d, l)
			}
			sum += l
			if l > 0.8 {
				above++
			}
		}
		wantMean := (1-d.Mix)/2 + d.Mix*d.Power/(d.Power+1)
		if got := sum / n; math.Abs(got-wantMean) > 5*6.5e-4 {
			t.Errorf("%+v: mean %v, want %v", d, got, wantMean)
		}
		if got, want := float64(above)/n, 1-d.CDF(0.8); math.Abs(got-want) > 5*1.1e-3 {
			t.Errorf("%+v: P(λ > 0.8) = %v, want %v", d, got, want)
		}
	}
}

// TestLambdaDistDensity: the density is the CDF's derivative (central
// differences, step 1e−5: truncation error ~ h²·|ρ”| ≲ 1e−8, rounding
// ~ 1e−16/h = 1e−11) and integrates to 1 (CDF(1) = 1).
func TestLambdaDistDensity(t *testing.T) {
	for _, d := range []LambdaDist{{}, {Mix: 0.75, Power: 4}, {Mix: 1, Power: 2.5}} {
		if c := d.CDF(1); math.Abs(c-1) > 1e-15 || d.CDF(0) != 0 {
			t.Errorf("%+v: CDF(0) = %v, CDF(1) = %v", d, d.CDF(0), c)
		}
		const h = 1e-5
		for _, l := range []float64{0.1, 0.3, 0.5, 0.9} {
			fd := (d.CDF(l+h) - d.CDF(l-h)) / (2 * h)
			if got := d.Density(l); math.Abs(got-fd) > 1e-7 {
				t.Errorf("%+v: ρ(%v) = %v, dCDF/dλ = %v", d, l, got, fd)
			}
		}
	}
}

func TestLambdaDistValidate(t *testing.T) {
	for _, d := range []LambdaDist{{}, {Mix: 0.75, Power: 4}, {Mix: 1, Power: 1}} {
		if err := d.Validate(); err != nil {
			t.Errorf("%+v: %v", d, err)
		}
	}
	for _, d := range []LambdaDist{{Mix: -0.1, Power: 2}, {Mix: 1.5, Power: 2}, {Mix: 0.5, Power: 0.5}, {Mix: 0.5}, {Mix: math.NaN(), Power: 2}, {Mix: 0.5, Power: math.Inf(1)}} {
		if err := d.Validate(); err == nil {
			t.Errorf("%+v accepted", d)
		}
	}
}

// TestSimulateBatchLambdaDist: SimulateBatch draws λ from opt.LambdaDist
// (the same stream as LambdaDist.Sample on the sample's RNG).
func TestSimulateBatchLambdaDist(t *testing.T) {
	f, err := Lookup("lingauss-k6")
	if err != nil {
		t.Fatal(err)
	}
	d := LambdaDist{Mix: 0.75, Power: 4}
	out := make([]Sample, 64)
	SimulateBatch(f, SimOptions{Seed: 9, Lambda: math.NaN(), LambdaDist: d}, 100, out)
	for i := range out {
		if want := d.Sample(SampleRNG(9, 100+uint64(i))); out[i].Lambda != want {
			t.Fatalf("sample %d: λ %v, want %v", i, out[i].Lambda, want)
		}
	}
}
