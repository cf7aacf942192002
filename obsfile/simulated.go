package obsfile

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/prismsbi/prism/family"
)

// simulateChunk is the number of samples simulated (in parallel) and
// written per step; memory stays bounded by one chunk.
const simulateChunk = 4096

// WriteSimulated simulates n samples of f (family.TrySimulateBatch with
// opt, in chunks) and writes them to w as JSON lines (AppendSample), the
// format of `prism simulate` that Read reads back. progress, if not nil,
// is called after each chunk with the number of samples written.
func WriteSimulated(w io.Writer, f family.Family, opt family.SimOptions, n int, withTable bool, progress func(done int)) error {
	buf := make([]family.Sample, min(simulateChunk, n))
	var line []byte
	for start := 0; start < n; start += len(buf) {
		batch := buf[:min(len(buf), n-start)]
		if _, err := family.TrySimulateBatch(f, opt, uint64(start), batch); err != nil {
			return err
		}
		for i := range batch {
			var err error
			line, err = AppendSample(line[:0], f, &batch[i], withTable)
			if err != nil {
				return err
			}
			if _, err := w.Write(line); err != nil {
				return err
			}
		}
		if progress != nil {
			progress(start + len(batch))
		}
	}
	return nil
}

// AppendSample appends one JSON line of sample s of f to b:
//
//	{"index":I,"lambda":L,"mask":[0,1,…],"theta":PARAMS,"x":[…]
//	 [,"bvals":[…],"bvecs":[[gx,gy,gz],…]] [,"at":[…]]}
//
// with PARAMS the natural parameters (family.Params); the table of a
// family with per-observation tables is written when withTable is set.
func AppendSample(b []byte, f family.Family, s *family.Sample, withTable bool) ([]byte, error) {
	b = append(b, `{"index":`...)
	b = strconv.AppendUint(b, s.Index, 10)
	b = append(b, `,"lambda":`...)
	b = appendFloat(b, s.Lambda)
	b = append(b, `,"mask":[`...)
	for k, on := range s.Mask {
		if k > 0 {
			b = append(b, ',')
		}
		if on {
			b = append(b, '1')
		} else {
			b = append(b, '0')
		}
	}
	theta, err := json.Marshal(f.Natural(s.Theta, s.Mask))
	if err != nil {
		return b, fmt.Errorf("sample %d: natural parameters: %w", s.Index, err)
	}
	b = append(b, `],"theta":`...)
	b = append(b, theta...)
	b = append(b, `,"x":`...)
	var bad bool
	if b, bad = AppendFloats(b, s.X); bad {
		return b, fmt.Errorf("sample %d (mask %s): the simulator produced a non-finite value", s.Index, family.MaskString(s.Mask))
	}
	if family.ObservationKindOf(f) == family.ObservationPoints {
		b = append(b, `,"at":`...)
		b, _ = AppendFloats(b, s.Design.Cov[:s.Design.N])
	}
	if withTable && s.Design.CovDim >= 4 {
		b = append(b, `,"bvals":[`...)
		for j := 0; j < s.Design.N; j++ {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendFloat(b, s.Design.Row(j)[0])
		}
		b = append(b, `],"bvecs":[`...)
		for j := 0; j < s.Design.N; j++ {
			if j > 0 {
				b = append(b, ',')
			}
			b, _ = AppendFloats(b, s.Design.Row(j)[1:4])
		}
		b = append(b, ']')
	}
	return append(b, "}\n"...), nil
}

// appendFloat appends v in the shortest form that parses back to v.
func appendFloat(b []byte, v float64) []byte {
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// AppendFloats appends a JSON array of xs and reports whether any value was
// not finite (JSON has no NaN or Inf; they are written as null).
func AppendFloats(b []byte, xs []float64) ([]byte, bool) {
	bad := false
	b = append(b, '[')
	for j, v := range xs {
		if j > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			bad = true
			b = append(b, "null"...)
			continue
		}
		b = appendFloat(b, v)
	}
	return append(b, ']'), bad
}
