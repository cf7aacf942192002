package eval

import (
	"math"
	"math/big"
	"slices"

	"github.com/prismsbi/prism/family"
)

// ExactResult holds comparisons with closed-form model posteriors.
type ExactResult struct {
	// Models is the size of the enumerated model space.
	Models int `json:"models"`
	// TV is the mean TV between q(M|x,λ) and the exact p(M|x,λ) over the
	// whole space, at each test observation's own λ.
	TV Value `json:"tv_mean"`
	// TVMedian and TVMax describe its distribution.
	TVMedian Number `json:"tv_median"`
	TVMax    Number `json:"tv_max"`
}

// modelSpace enumerates every mask of positive prior probability when the
// space has at most limit masks (nil otherwise).
func modelSpace(f family.Family, limit int) [][]bool {
	B, M := family.Counts(f)
	size := family.ModelSpaceSize(f)
	if size.Cmp(big.NewInt(int64(limit))) > 0 || B > 30 {
		return nil
	}
	prior := f.MaskPrior()
	var out [][]bool
	for b := 0; b < 1<<B; b++ {
		for nz := 0; nz < M; nz++ {
			m := make([]bool, B+M)
			family.MaskFromCode(uint32(b), m[:B])
			m[B+nz] = true
			if !math.IsInf(prior.LogProb(m, 0.5), -1) {
				out = append(out, m)
			}
		}
	}
	return out
}

func (r *run) exactTV() (*ExactResult, error) {
	ex := r.f.(family.ExactPosterior)
	space := modelSpace(r.f, 4096)
	if space == nil {
		return nil, nil
	}
	lq, err := r.logProbMasks(r.obs, r.lams, [][][]bool{space})
	if err != nil {
		return nil, err
	}
	prior := r.f.MaskPrior()
	tv := make([]float64, len(r.obs))
	le := make([]float64, len(space))
	for i, o := range r.obs {
		for k, m := range space {
			le[k] = ex.LogEvidence(o.X, m) + prior.LogProb(m, r.lams[i])
		}
		tv[i] = TV(Normalize(lq[i]), Normalize(le))
	}
	res := &ExactResult{Models: len(space), TVMedian: Number(Quantile(tv, 0.5)), TVMax: Number(slices.Max(tv))}
	res.TV.Value, res.TV.SE = MeanSE(tv)
	return res, nil
}
