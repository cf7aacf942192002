package dmri

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/gradtable"
)

// CheckDesign implements family.DesignChecker with the package function.
func (m *Model) CheckDesign(d family.Design) error { return gradtable.CheckDesign(d) }

// CheckObservation implements family.ObservationChecker: every value of
// the (b0-normalised) signal x must be finite with |x| ≤ gradtable.MaxSignalRatio.
func (m *Model) CheckObservation(d family.Design, x []float64) error {
	for k, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > gradtable.MaxSignalRatio {
			return fmt.Errorf("x[%d] = %v: a normalised diffusion signal must be finite with |S/S0| ≤ %v", k, v, gradtable.MaxSignalRatio)
		}
	}
	return nil
}

// DesignFromTable implements family.TableDesigner with ReadFSL followed by
// CheckDesign.
func (m *Model) DesignFromTable(bvalPath, bvecPath string) (family.Design, error) {
	d, err := gradtable.ReadFSL(bvalPath, bvecPath)
	if err != nil {
		return d, err
	}
	if err := gradtable.CheckDesign(d); err != nil {
		return d, fmt.Errorf("dmri: %s, %s: %w", bvalPath, bvecPath, err)
	}
	return d, nil
}
