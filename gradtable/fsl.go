package gradtable

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/prismsbi/prism/family"
)

// BZero is the largest b-value (s/mm²) treated as a non-diffusion-weighted
// (b≈0) volume by ReadFSL. Scanners and conversion tools write small
// nominal values for b0 volumes (5, 15 and 0.5 s/mm² in the test data).
const BZero = 50.0

// ReadFSL reads an FSL gradient table: bvalPath holds N b-values in s/mm²
// separated by white space (normally one row); bvecPath holds the gradient
// directions as 3 rows × N columns (FSL) or N rows × 3 columns (the
// transposed layout some tools write). When N = 3 the FSL layout is
// assumed.
//
// Directions are normalised to unit length. A zero or NaN direction is
// accepted only for a volume with b ≤ BZero and is stored as (0, 0, 0);
// every other problem (unparsable numbers, negative or non-finite b, count
// mismatch, missing direction at b > BZero) is an error naming the file.
// Volumes keep their order in the files; b-values are not rounded.
func ReadFSL(bvalPath, bvecPath string) (family.Design, error) {
	bvalData, err := os.ReadFile(bvalPath)
	if err != nil {
		return family.Design{}, fmt.Errorf("dmri: reading b-values: %w", err)
	}
	bvecData, err := os.ReadFile(bvecPath)
	if err != nil {
		return family.Design{}, fmt.Errorf("dmri: reading b-vectors: %w", err)
	}
	return ParseFSL(bvalData, bvecData, bvalPath, bvecPath)
}

// ParseFSL is ReadFSL on file contents (e.g. embedded tables); the paths are used in messages and
// for the design's name.
func ParseFSL(bvalData, bvecData []byte, bvalPath, bvecPath string) (family.Design, error) {
	bvals, err := parseRows(bvalData, bvalPath)
	if err != nil {
		return family.Design{}, err
	}
	var b []float64
	for _, row := range bvals {
		b = append(b, row...)
	}
	n := len(b)
	if n == 0 {
		return family.Design{}, fmt.Errorf("dmri: %s: no b-values", bvalPath)
	}
	for j, v := range b {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return family.Design{}, fmt.Errorf("dmri: %s: b-value %d is %v; b-values must be finite and non-negative", bvalPath, j+1, v)
		}
	}
	rows, err := parseRows(bvecData, bvecPath)
	if err != nil {
		return family.Design{}, err
	}
	vec := make([][3]float64, n)
	switch {
	case len(rows) == 3 && len(rows[0]) == n && len(rows[1]) == n && len(rows[2]) == n:
		for j := range vec {
			vec[j] = [3]float64{rows[0][j], rows[1][j], rows[2][j]}
		}
	case len(rows) == n && allLen(rows, 3):
		for j := range vec {
			vec[j] = [3]float64{rows[j][0], rows[j][1], rows[j][2]}
		}
	default:
		return family.Design{}, fmt.Errorf("dmri: %s: expected 3 rows of %d values (or %d rows of 3) to match the %d b-values in %s, found %s",
			bvecPath, n, n, n, bvalPath, shape(rows))
	}
	cov := make([]float64, 4*n)
	for j, g := range vec {
		norm := math.Sqrt(dot(g, g))
		finite := !math.IsNaN(norm) && !math.IsInf(norm, 0)
		cov[4*j] = b[j]
		switch {
		case finite && norm > 1e-6:
			cov[4*j+1], cov[4*j+2], cov[4*j+3] = g[0]/norm, g[1]/norm, g[2]/norm
		case b[j] <= BZero:
			// b≈0: the direction is irrelevant; store the zero vector.
		case !finite:
			return family.Design{}, fmt.Errorf("dmri: %s: direction %d is %v but its b-value in %s is %v > %v", bvecPath, j+1, g, bvalPath, b[j], BZero)
		default:
			return family.Design{}, fmt.Errorf("dmri: %s: direction %d has zero length but its b-value in %s is %v > %v", bvecPath, j+1, bvalPath, b[j], BZero)
		}
	}
	name := strings.TrimSuffix(bvalPath, ".bval")
	return family.Design{N: n, CovDim: 4, Cov: cov, Name: name}, nil
}

// parseRows parses a whitespace-separated numeric table, skipping blank
// lines and '#' comments. "nan" (any case) parses as NaN.
func parseRows(data []byte, path string) ([][]float64, error) {
	var rows [][]float64
	for ln, line := range bytes.Split(data, []byte("\n")) {
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(string(line))
		if len(fields) == 0 {
			continue
		}
		row := make([]float64, len(fields))
		for i, f := range fields {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return nil, fmt.Errorf("dmri: %s: line %d, value %d: %q is not a number", path, ln+1, i+1, f)
			}
			row[i] = v
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func allLen(rows [][]float64, n int) bool {
	for _, r := range rows {
		if len(r) != n {
			return false
		}
	}
	return true
}

func shape(rows [][]float64) string {
	if len(rows) == 0 {
		return "no values"
	}
	lens := make([]string, len(rows))
	for i, r := range rows {
		lens[i] = strconv.Itoa(len(r))
	}
	if len(lens) > 6 {
		lens = append(lens[:6], "…")
	}
	return fmt.Sprintf("%d rows with %s values", len(rows), strings.Join(lens, ", "))
}

func dot(a, b [3]float64) float64 { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }
