package posterior

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
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
// their exact log-probabilities. Decoding passes run concurrently on
// GOMAXPROCS goroutines (the network's sampler works on matrices too
// small for its kernels to fill both cores on their own).
//
// Reproducibility: with n ≥ 256, masks 256k … 256k+255 of observation i
// are decoded from stream (Seed, Offset+i, k), independently of
// everything else. With fewer masks, ⌊256/n⌋ observations of equal length
// share a decoding pass and a stream; these packs are aligned on global
// indices that are multiples of ⌊256/n⌋ (among observations of one
// length, in input order), so splitting a data set at such multiples
// gives the same masks.
func (p *Posterior) SampleMasks(obs []Observation, lambda float64, n int, opt Options) ([]MaskSet, error) {
	if err := p.checkObs(obs); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("posterior: SampleMasks of %d masks per observation", n)
	}
	out := make([]MaskSet, len(obs))
	for i := range out {
		out[i] = MaskSet{Masks: make([][]bool, n), LogQ: make([]float64, n)}
	}
	per := max(1, maskSamplerRows/n)
	// A job decodes masks [lo, hi) of the observations idx (local
	// positions pos in the encoder batch) from one stream.
	type job struct {
		idx, pos []int
		lo, hi   int
		s1, s2   uint64
	}
	const encChunk = 512 // observations encoded together
	g := engine.NewInferenceGraph()
	for _, gr := range groupObservations(obs, func(int) int { return n }) {
		for c0 := 0; c0 < len(gr.idx); c0 += encChunk {
			cidx := gr.idx[c0:min(c0+encChunk, len(gr.idx))]
			g.Reset()
			enc, err := p.net.Encode(g, chunk{idx: cidx}.observations(obs))
			if err != nil {
				return nil, fmt.Errorf("posterior: %w", err)
			}
			var jobs []job
			for s := 0; s < len(cidx); {
				first := opt.Offset + uint64(cidx[s])
				e := s + 1
				for e < len(cidx) && e-s < per && (opt.Offset+uint64(cidx[e]))/uint64(per) == first/uint64(per) {
					e++
				}
				pos := make([]int, e-s)
				for k := range pos {
					pos[k] = s + k
				}
				for k, lo := 0, 0; lo < n; k, lo = k+1, lo+maskSamplerRows {
					s1, s2 := streamSeed(opt.Seed, tagMasks, first, uint64(k))
					jobs = append(jobs, job{idx: cidx[s:e], pos: pos, lo: lo, hi: min(lo+maskSamplerRows, n), s1: s1, s2: s2})
				}
				s = e
			}
			tk, d := enc.Shape[1], enc.Shape[2]
			err = parallelJobs(len(jobs), func(j int) error {
				jb := jobs[j]
				// The observations of a job are consecutive in the batch.
				sub := &engine.Tensor{Shape: []int{len(jb.pos), tk, d}, Data: enc.Data[jb.pos[0]*tk*d : (jb.pos[len(jb.pos)-1]+1)*tk*d]}
				r := jb.hi - jb.lo
				masks, logq, err := p.net.SampleMasks(sub, lambda, r, rand.New(rand.NewPCG(jb.s1, jb.s2)))
				if err != nil {
					return fmt.Errorf("posterior: %w", err)
				}
				for a, i := range jb.idx {
					copy(out[i].Masks[jb.lo:jb.hi], masks[a*r:(a+1)*r])
					copy(out[i].LogQ[jb.lo:jb.hi], logq[a*r:(a+1)*r])
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// parallelJobs runs job(0…n−1) on GOMAXPROCS goroutines and returns the
// first error.
func parallelJobs(n int, job func(int) error) error {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for j := range n {
			if err := job(j); err != nil {
				return err
			}
		}
		return nil
	}
	var next atomic.Int64
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j := int(next.Add(1) - 1)
				if j >= n || errs[w] != nil {
					return
				}
				errs[w] = job(j)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// LogProbMasks returns the exact log q(M | x, λ) of the given masks, one
// teacher-forced pass per chunk: masks[i] are the masks of observation i,
// or, if len(masks) == 1, the same masks are scored for every observation.
func (p *Posterior) LogProbMasks(obs []Observation, lambda float64, masks [][][]bool, opt Options) ([][]float64, error) {
	if err := p.checkObs(obs); err != nil {
		return nil, err
	}
	lists := MaskLists(masks)
	if err := lists.Check(len(obs)); err != nil {
		return nil, fmt.Errorf("posterior: LogProbMasks: %w", err)
	}
	list := lists.For
	for i := range masks {
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
			lq, err = p.net.MaskLogProbs(g, enc, lambda, rowMasks, lq)
			if err != nil {
				return nil, fmt.Errorf("posterior: %w", err)
			}
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
	// Outside is true when the mask is outside the support of the
	// family's model prior (LogPrior = −Inf, EvidenceProxy = +Inf): the
	// network drew it but it is not a model of the family. Discover ranks
	// such masks after every supported one.
	Outside bool
	// Count is how often the model was drawn (Discover only).
	Count int
	// Frequency is Count over the number of draws (Discover only).
	Frequency float64
}

func (p *Posterior) ranked(m []bool, logq, lambda float64) Ranked {
	lp := p.fam.MaskPrior().LogProb(m, lambda)
	return Ranked{Mask: m, LogQ: logq, LogPrior: lp, EvidenceProxy: logq - lp, Outside: math.IsInf(lp, -1)}
}

// TopK ranks the candidate masks by log q(M | x, λ) for every observation
// and returns the k most probable (all if k ≤ 0 or k ≥ len(candidates)):
// exact model selection within a user-given subspace, paper App. B.3
// procedure (i). Ties keep candidate order.
func (p *Posterior) TopK(obs []Observation, lambda float64, candidates [][]bool, k int, opt Options) ([][]Ranked, error) {
	if len(candidates) == 0 {
		return nil, fmt.Errorf("posterior: TopK with no candidate masks")
	}
	for j, m := range candidates {
		if err := p.checkSupported(m); err != nil {
			return nil, fmt.Errorf("candidate %d: %w", j+1, err)
		}
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
// distinct ones by log q (masks outside the prior's support, which a
// network can leak a little mass to, after all others and marked Outside), returning the k most probable (all if k ≤ 0)
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
		sort.SliceStable(rs, func(a, b int) bool {
			if rs[a].Outside != rs[b].Outside {
				return !rs[a].Outside
			}
			return rs[a].LogQ > rs[b].LogQ
		})
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
		if len(rs) == 0 || rs[0].Outside {
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

// MaskLists holds the candidate models of a batch of observations: one
// list of masks per observation, or a single list shared by all of them.
type MaskLists [][][]bool

// For returns the list of observation i.
func (l MaskLists) For(i int) [][]bool {
	if len(l) == 1 {
		return l[0]
	}
	return l[i]
}

// Check reports an error unless l holds one list or one per observation
// (n of them), each with at least one mask.
func (l MaskLists) Check(n int) error {
	if len(l) != 1 && len(l) != n {
		return fmt.Errorf("%d mask lists for %d observations (want 1 or %d)", len(l), n, n)
	}
	for i := range l {
		if len(l[i]) == 0 {
			return fmt.Errorf("no masks for observation %d", i)
		}
	}
	return nil
}

// RankedMasks returns the masks of each observation's ranked models, in
// rank order: the candidate lists of discovered models (Discover).
func RankedMasks(rs [][]Ranked) [][][]bool {
	out := make([][][]bool, len(rs))
	for i := range rs {
		for _, r := range rs[i] {
			out[i] = append(out[i], r.Mask)
		}
	}
	return out
}
