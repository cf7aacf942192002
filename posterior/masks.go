package posterior

import (
	"fmt"
	"math/rand/v2"
	"sort"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/network"
)

// maskSamplerRows is the number of rows the network's KV-cached sampler
// decodes at once (network.SampleMasks): with fewer masks per observation
// it packs ⌊maskSamplerRows/n⌋ observations into one decoding pass.
const maskSamplerRows = 256

// MaskSet holds masks of one observation with their log q(M | x, λ).
type MaskSet struct {
	Masks [][]bool
	LogQ  []float64
}

// SampleMasks draws n masks from q(M | x, λ) for every observation,
// autoregressively with the network's KV cache, and returns them with
// their exact log-probabilities.
//
// Reproducibility: with n ≥ 256 every observation is decoded on its own
// from stream (Seed, Offset+i). With fewer masks, ⌊256/n⌋ observations of
// equal length share a decoding pass and a stream; these packs are aligned
// on global indices that are multiples of ⌊256/n⌋ (among observations of
// one length, in input order), so splitting a data set at such multiples
// gives the same masks.
func (p *Posterior) SampleMasks(obs []Observation, lambda float64, n int, opt Options) ([]MaskSet, error) {
	if err := p.checkObs(obs); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("posterior: SampleMasks of %d masks per observation", n)
	}
	out := make([]MaskSet, len(obs))
	per := max(1, maskSamplerRows/n)
	g := engine.NewInferenceGraph()
	var pcg rand.PCG
	rng := rand.New(&pcg)
	for _, gr := range groupObservations(obs, func(int) int { return n }) {
		// Packs aligned on global index multiples of per.
		for s := 0; s < len(gr.idx); {
			first := opt.Offset + uint64(gr.idx[s])
			e := s + 1
			for e < len(gr.idx) && e-s < per && (opt.Offset+uint64(gr.idx[e]))/uint64(per) == first/uint64(per) {
				e++
			}
			idx := gr.idx[s:e]
			g.Reset()
			enc, err := p.net.Encode(g, chunk{idx: idx}.observations(obs))
			if err != nil {
				return nil, fmt.Errorf("posterior: %w", err)
			}
			pcg.Seed(streamSeed(opt.Seed, tagMasks, first, 0))
			masks, logq, err := p.net.SampleMasks(enc, lambda, n, rng)
			if err != nil {
				return nil, fmt.Errorf("posterior: %w", err)
			}
			for j, i := range idx {
				out[i] = MaskSet{Masks: masks[j*n : (j+1)*n], LogQ: logq[j*n : (j+1)*n]}
			}
			s = e
		}
	}
	return out, nil
}

// LogProbMasks returns the exact log q(M | x, λ) of the given masks, one
// teacher-forced pass per chunk: masks[i] are the masks of observation i,
// or, if len(masks) == 1, the same masks are scored for every observation.
func (p *Posterior) LogProbMasks(obs []Observation, lambda float64, masks [][][]bool, opt Options) ([][]float64, error) {
	if err := p.checkObs(obs); err != nil {
		return nil, err
	}
	if len(masks) != 1 && len(masks) != len(obs) {
		return nil, fmt.Errorf("posterior: LogProbMasks of %d mask lists for %d observations", len(masks), len(obs))
	}
	list := func(i int) [][]bool {
		if len(masks) == 1 {
			return masks[0]
		}
		return masks[i]
	}
	for i := range masks {
		if len(masks[i]) == 0 {
			return nil, fmt.Errorf("posterior: LogProbMasks: no masks for observation %d", i)
		}
		for _, m := range masks[i] {
			if err := p.checkMask(m); err != nil {
				return nil, err
			}
		}
	}
	out := make([][]float64, len(obs))
	g := engine.NewInferenceGraph()
	var rowMasks [][]bool
	var lq []float64
	for _, gr := range groupObservations(obs, func(i int) int { return len(list(i)) }) {
		for _, ch := range gr.chunks(opt.chunkRows(defaultMaskChunkRows)) {
			g.Reset()
			enc, err := p.net.Encode(g, ch.observations(obs))
			if err != nil {
				return nil, fmt.Errorf("posterior: %w", err)
			}
			rowMasks = rowMasks[:0]
			for _, i := range ch.idx {
				rowMasks = append(rowMasks, list(i)[ch.lo:ch.hi]...)
			}
			logits, err := p.net.MaskLogits(g, enc, lambda, rowMasks)
			if err != nil {
				return nil, fmt.Errorf("posterior: %w", err)
			}
			lq = network.MaskLogProb(logits, rowMasks, lq)
			r := ch.hi - ch.lo
			for j, i := range ch.idx {
				if out[i] == nil {
					out[i] = make([]float64, gr.rows)
				}
				copy(out[i][ch.lo:ch.hi], lq[j*r:(j+1)*r])
			}
		}
	}
	return out, nil
}

// Ranked is one model of a ranking for one observation.
type Ranked struct {
	Mask []bool
	// LogQ is log q(M | x, λ).
	LogQ float64
	// LogPrior is log p(M | λ) under the family's mask prior.
	LogPrior float64
	// EvidenceProxy is log q(M | x, λ) − log p(M | λ), the network's
	// (biased) proxy for log p(x | M) up to a constant (paper App. B.1).
	EvidenceProxy float64
	// Count is how often the model was drawn (Discover only).
	Count int
	// Frequency is Count over the number of draws (Discover only).
	Frequency float64
}

func (p *Posterior) ranked(m []bool, logq, lambda float64) Ranked {
	lp := p.fam.MaskPrior().LogProb(m, lambda)
	return Ranked{Mask: m, LogQ: logq, LogPrior: lp, EvidenceProxy: logq - lp}
}

// TopK ranks the candidate masks by log q(M | x, λ) for every observation
// and returns the k most probable (all if k ≤ 0 or k ≥ len(candidates)):
// exact model selection within a user-given subspace, paper App. B.3
// procedure (i). Ties keep candidate order.
func (p *Posterior) TopK(obs []Observation, lambda float64, candidates [][]bool, k int, opt Options) ([][]Ranked, error) {
	if len(candidates) == 0 {
		return nil, fmt.Errorf("posterior: TopK with no candidate masks")
	}
	lq, err := p.LogProbMasks(obs, lambda, [][][]bool{candidates}, opt)
	if err != nil {
		return nil, err
	}
	if k <= 0 || k > len(candidates) {
		k = len(candidates)
	}
	out := make([][]Ranked, len(obs))
	order := make([]int, len(candidates))
	for i := range obs {
		for j := range order {
			order[j] = j
		}
		sort.SliceStable(order, func(a, b int) bool { return lq[i][order[a]] > lq[i][order[b]] })
		out[i] = make([]Ranked, k)
		for r, j := range order[:k] {
			out[i][r] = p.ranked(candidates[j], lq[i][j], lambda)
		}
	}
	return out, nil
}

// Discover draws n masks from q(M | x, λ) per observation and ranks the
// distinct ones by log q, returning the k most probable (all if k ≤ 0)
// with how often each was drawn: the discovery step of paper App. B.3
// procedure (ii). Its first entry is the approximate MAP model.
func (p *Posterior) Discover(obs []Observation, lambda float64, n, k int, opt Options) ([][]Ranked, error) {
	sets, err := p.SampleMasks(obs, lambda, n, opt)
	if err != nil {
		return nil, err
	}
	out := make([][]Ranked, len(obs))
	for i, s := range sets {
		pos := map[string]int{}
		var rs []Ranked
		for j, m := range s.Masks {
			key := family.MaskString(m)
			if r, ok := pos[key]; ok {
				rs[r].Count++
				continue
			}
			pos[key] = len(rs)
			r := p.ranked(m, s.LogQ[j], lambda)
			r.Count = 1
			rs = append(rs, r)
		}
		for j := range rs {
			rs[j].Frequency = float64(rs[j].Count) / float64(n)
		}
		sort.SliceStable(rs, func(a, b int) bool { return rs[a].LogQ > rs[b].LogQ })
		if k > 0 && k < len(rs) {
			rs = rs[:k]
		}
		out[i] = rs
	}
	return out, nil
}

// MostSelected counts, over all observations, which model ranks first in
// each ranking (e.g. Discover's approximate MAP models) and returns the k
// most often selected masks with their counts, most frequent first (ties
// in order of first appearance). Paper App. B.3 procedure (ii) then runs
// TopK within these k models for every observation.
func MostSelected(rankings [][]Ranked, k int) (masks [][]bool, counts []int) {
	pos := map[string]int{}
	for _, rs := range rankings {
		if len(rs) == 0 {
			continue
		}
		key := family.MaskString(rs[0].Mask)
		if j, ok := pos[key]; ok {
			counts[j]++
			continue
		}
		pos[key] = len(masks)
		masks = append(masks, rs[0].Mask)
		counts = append(counts, 1)
	}
	order := make([]int, len(masks))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return counts[order[a]] > counts[order[b]] })
	if k > 0 && k < len(order) {
		order = order[:k]
	}
	m2, c2 := make([][]bool, len(order)), make([]int, len(order))
	for r, j := range order {
		m2[r], c2[r] = masks[j], counts[j]
	}
	return m2, c2
}
