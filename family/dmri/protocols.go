package dmri

import (
	_ "embed"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/gradtable"
)

//go:embed data/hcp-like.bval
var hcpBval []byte

//go:embed data/hcp-like.bvec
var hcpBvec []byte

// Protocol draws random acquisition protocols around a typical table, as the
// reference implementation's acquisition-scheme generator does
// (its code values):
//
//   - b-values: with probability PTypical the typical table's b-values,
//     otherwise N independent draws from U(0, BMax); the choice is made once
//     per protocol, not per measurement;
//   - dropout: each b-value is then kept with probability Keep and set to 0
//     otherwise;
//   - directions: independently of the b-values, with probability PTypical
//     the typical table's directions, otherwise N independent directions
//     uniform on the sphere (normalised standard-normal vectors).
//
// Measurements keep their table order (the reference additionally sorts the
// b-values after dropout without permuting the directions; the set is
// exchangeable, so the order carries no information).
type Protocol struct {
	Name     string
	Typical  family.Design // the typical table (N measurements)
	PTypical float64       // probability of the typical b-values, and separately of the typical directions
	BMax     float64       // random b-values are U(0, BMax) s/mm²
	Keep     float64       // per-measurement probability that the b-value is not dropped to 0
}

// SampleDesign implements family.DesignSampler; it allocates the returned
// design's covariates.
func (p *Protocol) SampleDesign(r *rand.Rand) family.Design {
	return p.SampleDesignInto(r, make([]float64, 4*p.Typical.N))
}

// CovLen implements family.DesignSamplerInto.
func (p *Protocol) CovLen() int { return 4 * p.Typical.N }

// SampleDesignInto is SampleDesign writing the covariates into buf (length
// at least 4·N), for callers that reuse buffers.
func (p *Protocol) SampleDesignInto(r *rand.Rand, buf []float64) family.Design {
	n := p.Typical.N
	cov := buf[:4*n]
	typ := p.Typical.Cov
	if r.Float64() < p.PTypical {
		for j := 0; j < n; j++ {
			cov[4*j] = typ[4*j]
		}
	} else {
		for j := 0; j < n; j++ {
			cov[4*j] = p.BMax * r.Float64()
		}
	}
	for j := 0; j < n; j++ {
		if r.Float64() >= p.Keep {
			cov[4*j] = 0
		}
	}
	if r.Float64() < p.PTypical {
		for j := 0; j < n; j++ {
			copy(cov[4*j+1:4*j+4], typ[4*j+1:4*j+4])
		}
	} else {
		for j := 0; j < n; j++ {
			var g [3]float64
			nrm := 0.0
			for nrm < 1e-12 {
				g = [3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
				nrm = math.Sqrt(dot(g, g))
			}
			cov[4*j+1], cov[4*j+2], cov[4*j+3] = g[0]/nrm, g[1]/nrm, g[2]/nrm
		}
	}
	return family.Design{N: n, CovDim: 4, Cov: cov, Name: p.Name}
}

// Protocol parameters of the training mixes (the reference implementation's
// code values; see docs/families/dmri.md for the paper's differing numbers).
const (
	// RandomBMax is the upper end of random b-values in s/mm².
	RandomBMax = 4000.0
	// DropoutKeep is the probability that a b-value survives dropout.
	DropoutKeep = 0.99
	// UKBTypicalProb and HCPTypicalProb are the probabilities of the
	// typical tables in the UKB-like (n=105) and HCP-like (n=297) mixes.
	UKBTypicalProb = 0.5
	HCPTypicalProb = 0.8
)

var (
	ukbOnce   sync.Once
	ukbDesign family.Design
	hcpOnce   sync.Once
	hcpDesign family.Design
	hcpErr    error
)

// UKBDesign returns the UK-Biobank-like typical protocol: n = 105 with
// 5 × b=0, 50 × b=1000 and 50 × b=2000 s/mm², in that order. The two shells'
// directions are ElectrostaticShells(2, 50) (computed once); the b=0 volumes
// carry the first five b=1000 directions. The returned design shares its
// covariates with every other caller and must not be modified.
func UKBDesign() family.Design {
	ukbOnce.Do(func() {
		dirs := ElectrostaticShells(2, 50)
		cov := make([]float64, 0, 4*105)
		for j := 0; j < 5; j++ {
			g := dirs[0][j]
			cov = append(cov, 0, g[0], g[1], g[2])
		}
		for s, b := range []float64{1000, 2000} {
			for _, g := range dirs[s] {
				cov = append(cov, b, g[0], g[1], g[2])
			}
		}
		ukbDesign = family.Design{N: 105, CovDim: 4, Cov: cov, Name: "ukb"}
	})
	return ukbDesign
}

// HCPDesign returns the HCP-like typical protocol, n = 297, from the
// embedded table (data/README.md). As in the reference implementation the
// b-values are rounded to the nearest 1000 s/mm² (so b≈5 becomes 0) and the
// measurements are stably sorted by b-value. The returned design must not
// be modified.
func HCPDesign() family.Design {
	hcpOnce.Do(func() {
		hcpDesign, hcpErr = gradtable.ParseFSL(hcpBval, hcpBvec, "hcp-like.bval (embedded)", "hcp-like.bvec (embedded)")
		if hcpErr != nil {
			return
		}
		d := hcpDesign
		idx := make([]int, d.N)
		for j := range idx {
			idx[j] = j
			d.Cov[4*j] = math.Min(math.Max(math.Round(d.Cov[4*j]/1000)*1000, 0), 4000)
		}
		sort.SliceStable(idx, func(a, b int) bool { return d.Cov[4*idx[a]] < d.Cov[4*idx[b]] })
		cov := make([]float64, 4*d.N)
		for j, i := range idx {
			copy(cov[4*j:4*j+4], d.Cov[4*i:4*i+4])
		}
		hcpDesign = family.Design{N: d.N, CovDim: 4, Cov: cov, Name: "hcp"}
	})
	if hcpErr != nil {
		// The table is part of the binary; failing to parse it is a bug.
		panic(hcpErr)
	}
	return hcpDesign
}

// protocolNames lists the named protocols Designs knows.
var protocolNames = []string{"", "ukb", "hcp", "random", "ukb-random", "hcp-random", "ukb-mix", "hcp-mix"}

// Designs implements family.Family. Named specs:
//
//	"ukb"        UKB-like typical table (n=105), fixed
//	"hcp"        HCP-like typical table (n=297), fixed
//	"ukb-random" random protocols with n=105 (b ~ U(0, 4000), random directions, dropout)
//	"hcp-random" random protocols with n=297
//	"random"     = "ukb-random"
//	"ukb-mix"    per protocol: UKB-like typical (p=0.5) or random, n=105
//	"hcp-mix"    per protocol: HCP-like typical (p=0.8) or random, n=297
//	""           the default training mix = "ukb-mix"
//	"shell:B:N:Z" single-shell protocols: Z b=0 measurements and N at
//	             b = B s/mm² along directions drawn uniformly per protocol
//	             (a clinical HARDI scan; "shell:2500:20:1" is the layout of
//	             the bundled xa30 example)
//
// Any other spec is a file prefix: the fixed design read by ReadFSL from
// spec+".bval" and spec+".bvec".
func (m *Model) Designs(spec string) (family.DesignSampler, error) {
	return Designs(spec)
}

// Designs is the family-independent implementation of Model.Designs.
func Designs(spec string) (family.DesignSampler, error) {
	switch spec {
	case "ukb":
		return family.FixedDesign(UKBDesign()), nil
	case "hcp":
		return family.FixedDesign(HCPDesign()), nil
	case "random", "ukb-random":
		return &Protocol{Name: "ukb-random", Typical: UKBDesign(), PTypical: 0, BMax: RandomBMax, Keep: DropoutKeep}, nil
	case "hcp-random":
		return &Protocol{Name: "hcp-random", Typical: HCPDesign(), PTypical: 0, BMax: RandomBMax, Keep: DropoutKeep}, nil
	case "", "ukb-mix":
		return &Protocol{Name: "ukb-mix", Typical: UKBDesign(), PTypical: UKBTypicalProb, BMax: RandomBMax, Keep: DropoutKeep}, nil
	case "hcp-mix":
		return &Protocol{Name: "hcp-mix", Typical: HCPDesign(), PTypical: HCPTypicalProb, BMax: RandomBMax, Keep: DropoutKeep}, nil
	}
	if rest, ok := strings.CutPrefix(spec, "shell:"); ok {
		return parseShell(spec, rest)
	}
	d, err := gradtable.ReadFSL(spec+".bval", spec+".bvec")
	if err != nil {
		return nil, fmt.Errorf("dmri: protocol %q is neither one of %q nor a readable FSL prefix: %w", spec, protocolNames[1:], err)
	}
	if err := gradtable.CheckDesign(d); err != nil {
		return nil, fmt.Errorf("dmri: protocol %s.bval, %s.bvec: %w", spec, spec, err)
	}
	return family.FixedDesign(d), nil
}

// Shell draws single-shell protocols: Zeros b=0 measurements followed by N
// measurements at b = B along independent uniformly distributed directions
// (normalised standard-normal vectors), new directions for every protocol.
// The b=0 measurements carry direction (1, 0, 0), which the b=0 signal does
// not depend on.
type Shell struct {
	B        float64 // shell b-value, s/mm²
	N, Zeros int
}

func parseShell(spec, rest string) (*Shell, error) {
	parts := strings.Split(rest, ":")
	bad := func(why string) error {
		return fmt.Errorf("dmri: protocol %q: %s (want shell:B:N:Z, e.g. shell:2500:20:1)", spec, why)
	}
	if len(parts) != 3 {
		return nil, bad("need three fields")
	}
	b, err := strconv.ParseFloat(parts[0], 64)
	if err != nil || !(b > 0 && b <= 1e5) {
		return nil, bad("b-value must be a number in (0, 100000] s/mm²")
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n < 1 {
		return nil, bad("N must be a positive integer")
	}
	z, err := strconv.Atoi(parts[2])
	if err != nil || z < 0 {
		return nil, bad("Z must be a non-negative integer")
	}
	return &Shell{B: b, N: n, Zeros: z}, nil
}

// SampleDesign implements family.DesignSampler.
func (s *Shell) SampleDesign(r *rand.Rand) family.Design {
	return s.SampleDesignInto(r, make([]float64, s.CovLen()))
}

// CovLen implements family.DesignSamplerInto.
func (s *Shell) CovLen() int { return 4 * (s.N + s.Zeros) }

// SampleDesignInto implements family.DesignSamplerInto.
func (s *Shell) SampleDesignInto(r *rand.Rand, buf []float64) family.Design {
	n := s.N + s.Zeros
	cov := buf[:4*n]
	for j := range s.Zeros {
		cov[4*j], cov[4*j+1], cov[4*j+2], cov[4*j+3] = 0, 1, 0, 0
	}
	for j := s.Zeros; j < n; j++ {
		var g [3]float64
		nrm := 0.0
		for nrm < 1e-12 {
			g = [3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
			nrm = math.Sqrt(dot(g, g))
		}
		cov[4*j], cov[4*j+1], cov[4*j+2], cov[4*j+3] = s.B, g[0]/nrm, g[1]/nrm, g[2]/nrm
	}
	return family.Design{N: n, CovDim: 4, Cov: cov, Name: fmt.Sprintf("shell:%g:%d:%d", s.B, s.N, s.Zeros)}
}
