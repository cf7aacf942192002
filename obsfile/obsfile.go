// Package obsfile reads the observation files of prism's posterior
// commands (sample, select, predict, lambda-sweep): JSON lines with one
// data set per line ({"x": […]}, optionally with its own dMRI table
// "bvals"/"bvecs" or, for families whose observations have their own
// covariate values, "at": […], and the "mask"/"theta" that `prism
// simulate` records),
// or CSV with one data set per row.
//
// Every value is checked before anything is computed: a missing or null
// entry, a number beyond float32's range (the network computes in
// float32), a table the family refuses (family.DesignChecker, e.g. a dMRI
// table without diffusion weighting) and values the family calls
// implausible (family.ObservationChecker) are errors that name the file,
// the line and the entry.
package obsfile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
)

// Record is one observation read from a file.
type Record struct {
	Obs   posterior.Observation
	Truth []bool        // true mask, when the line came from `prism simulate`
	Theta family.Params // true parameters, when the line came from `prism simulate`
}

// DesignFunc returns the design of observations that carry no table of
// their own (from --bval/--bvec or --protocol); it is called at most
// once per file, and only when needed.
type DesignFunc func() (family.Design, error)

// MaxLine is the longest JSON line read (256 MiB).
const MaxLine = 1 << 28

// Read reads path as CSV when its name ends in .csv (any case) and as JSON
// lines otherwise.
func Read(path string, f family.Family, design DesignFunc) ([]Record, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if strings.HasSuffix(strings.ToLower(path), ".csv") {
		return ReadCSV(fh, path, f, design)
	}
	return ReadJSONLines(fh, path, f, design)
}

// jsonLine is one JSON line; pointers tell null from 0.
type jsonLine struct {
	X     []*float64    `json:"x"`
	BVals []*float64    `json:"bvals"`
	BVecs [][]*float64  `json:"bvecs"`
	At    []*float64    `json:"at"`
	Mask  []int         `json:"mask"`
	Theta family.Params `json:"theta"`
}

// ReadJSONLines reads JSON lines from r; name is used in messages.
// Blank lines are skipped.
func ReadJSONLines(r io.Reader, name string, f family.Family, design DesignFunc) ([]Record, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), MaxLine)
	var out []Record
	var def *family.Design
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		rec, err := parseJSONLine(b, f, design, &def)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

func parseJSONLine(b []byte, f family.Family, design DesignFunc, def **family.Design) (Record, error) {
	var j jsonLine
	if err := json.Unmarshal(b, &j); err != nil {
		return Record{}, err
	}
	if len(j.X) == 0 {
		return Record{}, errors.New(`no "x" values`)
	}
	x, err := values("x", j.X)
	if err != nil {
		return Record{}, err
	}
	var d family.Design
	points := family.ObservationKindOf(f) == family.ObservationPoints
	switch {
	case points && j.At == nil:
		return Record{}, fmt.Errorf(`no "at" values: %s measures every observation at covariate values of its own (give them as "at": […], one per value of "x")`, f.Name())
	case !points && j.At != nil:
		return Record{}, fmt.Errorf(`"at" is for families whose observations have their own covariate values; %s has a fixed design`, f.Name())
	case points:
		at, err := values("at", j.At)
		if err != nil {
			return Record{}, err
		}
		d = family.Design{N: len(at), CovDim: 1, Cov: at, Name: "at"}
	case j.BVals != nil || j.BVecs != nil:
		if d, err = ownTable(j.BVals, j.BVecs, len(x)); err != nil {
			return Record{}, err
		}
		if c, ok := f.(family.DesignChecker); ok {
			if err := c.CheckDesign(d); err != nil {
				return Record{}, fmt.Errorf(`"bvals"/"bvecs": %w`, err)
			}
		}
	default:
		if *def == nil {
			if design == nil {
				return Record{}, errors.New(`no "bvals"/"bvecs" and no default design`)
			}
			dd, err := design()
			if err != nil {
				return Record{}, err
			}
			*def = &dd
		}
		d = **def
	}
	if d.N != len(x) {
		return Record{}, fmt.Errorf("%d values for a design of %d measurements", len(x), d.N)
	}
	if err := checkObservation(f, d, x); err != nil {
		return Record{}, err
	}
	rec := Record{Obs: posterior.Observation{Design: d, X: x}, Theta: j.Theta}
	if len(j.Mask) == len(f.Components()) {
		rec.Truth = make([]bool, len(j.Mask))
		for k, v := range j.Mask {
			rec.Truth[k] = v != 0
		}
	}
	return rec, nil
}

// values dereferences v, refusing null and numbers beyond float32's range.
func values(what string, v []*float64) ([]float64, error) {
	out := make([]float64, len(v))
	for k, p := range v {
		if p == nil {
			return nil, fmt.Errorf("%s[%d] is null", what, k)
		}
		if err := checkValue(*p); err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", what, k, err)
		}
		out[k] = *p
	}
	return out, nil
}

// checkValue refuses values the float32 network would turn into ±Inf.
func checkValue(v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > math.MaxFloat32 {
		return fmt.Errorf("%v is beyond the float32 range (±%.4g) the network computes in", v, math.MaxFloat32)
	}
	return nil
}

// ownTable builds the design of a line's "bvals"/"bvecs" (b in s/mm²,
// directions normalised to unit length; a zero direction stays zero and
// is accepted only where the family allows it).
func ownTable(bvals []*float64, bvecs [][]*float64, n int) (family.Design, error) {
	if len(bvals) != n || len(bvecs) != n {
		return family.Design{}, fmt.Errorf(`%d values with %d "bvals" and %d "bvecs"`, n, len(bvals), len(bvecs))
	}
	b, err := values("bvals", bvals)
	if err != nil {
		return family.Design{}, err
	}
	d := family.Design{N: n, CovDim: 4, Cov: make([]float64, 4*n), Name: "table"}
	for k := range n {
		if len(bvecs[k]) != 3 {
			return family.Design{}, fmt.Errorf("bvecs[%d] has %d entries, want 3", k, len(bvecs[k]))
		}
		g, err := values(fmt.Sprintf("bvecs[%d]", k), bvecs[k])
		if err != nil {
			return family.Design{}, err
		}
		d.Cov[4*k] = b[k]
		if l := math.Sqrt(g[0]*g[0] + g[1]*g[1] + g[2]*g[2]); l > 1e-6 && !math.IsInf(l, 0) {
			g[0], g[1], g[2] = g[0]/l, g[1]/l, g[2]/l
		} else {
			g[0], g[1], g[2] = 0, 0, 0
		}
		copy(d.Cov[4*k+1:4*k+4], g)
	}
	return d, nil
}

// checkObservation applies the family's plausibility check, if any.
func checkObservation(f family.Family, d family.Design, x []float64) error {
	if c, ok := f.(family.ObservationChecker); ok {
		return c.CheckObservation(d, x)
	}
	return nil
}

// ReadCSV reads comma-separated rows of values from r (blank lines and
// lines starting with '#' skipped), all on the design that design
// returns; name is used in messages.
func ReadCSV(r io.Reader, name string, f family.Family, design DesignFunc) ([]Record, error) {
	if design == nil {
		return nil, fmt.Errorf("%s: CSV observations need a design", name)
	}
	if family.ObservationKindOf(f) == family.ObservationPoints {
		return nil, fmt.Errorf(`%s: %s measures every observation at covariate values of its own; give JSON lines with "x" and "at", not CSV`, name, f.Name())
	}
	d, err := design()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), MaxLine)
	var out []Record
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		fields := strings.Split(s, ",")
		x := make([]float64, len(fields))
		for k, fl := range fields {
			v, err := strconv.ParseFloat(strings.TrimSpace(fl), 64)
			if err == nil {
				err = checkValue(v)
			}
			if err != nil {
				return nil, fmt.Errorf("%s:%d: column %d: %w", name, line, k+1, err)
			}
			x[k] = v
		}
		if len(x) != d.N {
			return nil, fmt.Errorf("%s:%d: %d values for a design of %d measurements", name, line, len(x), d.N)
		}
		if err := checkObservation(f, d, x); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		out = append(out, Record{Obs: posterior.Observation{Design: d, X: x}})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// Observations returns the observations of records.
func Observations(recs []Record) []posterior.Observation {
	o := make([]posterior.Observation, len(recs))
	for i := range recs {
		o[i] = recs[i].Obs
	}
	return o
}

// ReadOne reads observation index (from 0) of the file path, in any format
// Read accepts.
func ReadOne(path string, index int, f family.Family, design DesignFunc) (Record, error) {
	in, err := Read(path, f, design)
	if err != nil {
		return Record{}, err
	}
	if index >= len(in) {
		return Record{}, fmt.Errorf("%s holds %d observations, index %d is past its end", path, len(in), index)
	}
	return in[index], nil
}

// ReadMasks reads a file of candidate models: one 0/1 mask string per
// line (blank lines and # comments skipped). Masks that are not models of
// f (family.CheckMask) are errors naming the file and line.
func ReadMasks(path string, f family.Family) ([][]bool, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var ms [][]bool
	sc := bufio.NewScanner(fh)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		m, err := family.ParseMask(s, len(f.Components()))
		if err == nil {
			err = family.CheckMask(f, m)
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		ms = append(ms, m)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("%s lists no masks", path)
	}
	return ms, nil
}
