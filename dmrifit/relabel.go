package dmrifit

import (
	"math"
	"sort"
)

// Stick relabelling of the amortized fit (issue 20).
//
// The sticks of ball-and-sticks are exchangeable, so which label a sample
// gives a fibre is arbitrary: a network draws the fibres of a crossing in
// either order, and sorting each sample's sticks by its own fractions
// (f1 = 0.38 in one sample, 0.36 in the next) puts fibre A in slot 1 of some
// samples and fibre B in others. The dyadic mean of a slot then mixes two
// directions: dyads2 collapses towards dyads1 (a 60° crossing read as 15°
// with the shipped b3s-brain network) and its dispersion grows. BedpostX
// has no such problem because an MCMC chain does not switch labels; it only
// orders the sticks by their posterior mean fraction at the end.
//
// alignSticks does for the amortized samples what the chain does
// implicitly: it assigns the sticks of every sample to slots so that each
// slot holds one fibre across samples (a k-means on axes with the squared
// cosine as similarity, as in relabelling algorithms for mixture
// posteriors), then orders the slots by decreasing mean fraction (absent
// sticks count as f = 0), as BedpostX. A fibre's samples stay together;
// nfibres_prob, mean_fN and dyadsN then describe the same fibres.

// alignIterations is the number of assignment/update rounds after the
// medoid initialisation; the assignment is usually stable after one or two.
const alignIterations = 4

// alignScratch holds the per-worker buffers of alignSticks.
type alignScratch struct {
	dir   [][MaxFibres][3]float64
	f     [][MaxFibres]float32
	th    [][MaxFibres]float32
	ph    [][MaxFibres]float32
	n     []int // active sticks per sample
	slot  [][MaxFibres]int
	perms [][MaxFibres]int
}

func newAlignScratch(samples, sticks int) *alignScratch {
	a := &alignScratch{
		dir: make([][MaxFibres][3]float64, samples), f: make([][MaxFibres]float32, samples),
		th: make([][MaxFibres]float32, samples), ph: make([][MaxFibres]float32, samples),
		n: make([]int, samples), slot: make([][MaxFibres]int, samples),
	}
	a.perms = permutations(sticks)
	return a
}

// permutations lists the permutations of 0..k−1.
func permutations(k int) [][MaxFibres]int {
	var out [][MaxFibres]int
	var p [MaxFibres]int
	used := [MaxFibres]bool{}
	var rec func(i int)
	rec = func(i int) {
		if i == k {
			out = append(out, p)
			return
		}
		for j := 0; j < k; j++ {
			if !used[j] {
				used[j] = true
				p[i] = j
				rec(i + 1)
				used[j] = false
			}
		}
	}
	rec(0)
	return out
}

func unitDir(th, ph float32) [3]float64 {
	st, ct := math.Sincos(float64(th))
	sp, cp := math.Sincos(float64(ph))
	return [3]float64{st * cp, st * sp, ct}
}

func cos2(a, b [3]float64) float64 {
	c := a[0]*b[0] + a[1]*b[1] + a[2]*b[2]
	return c * c
}

// slotModel describes the samples assigned to one slot: their principal
// axis, a Watson-like concentration κ (E[1 − cos²] ≈ 1/κ for a
// concentrated Watson distribution) and the mean and standard deviation
// of their fractions. Before the first update (plain) only the axis is
// used.
type slotModel struct {
	ref           [3]float64
	has           bool
	kappa, mu, sd float64
}

// Floors of the slot statistics: κ ≥ 1 (the large-κ approximation of the
// Watson log-density is used) and a fraction spread ≥ 0.02.
const (
	minKappa  = 1.0
	minFracSD = 0.02
)

// score is the log-density of a stick (n, f) under slot m: with full, a
// Watson axis density ≈ κ/(2π)·exp(κ(cos² − 1)) times a normal density of
// the fraction; otherwise cos² alone. An undefined slot scores as a
// uniform axis and fraction (full) or 0.
func (m *slotModel) score(n [3]float64, f float64, full bool) float64 {
	if !full {
		if !m.has {
			return 0
		}
		return cos2(n, m.ref)
	}
	if !m.has {
		return -math.Log(4 * math.Pi)
	}
	z := (f - m.mu) / m.sd
	return math.Log(m.kappa/(2*math.Pi)) + m.kappa*(cos2(n, m.ref)-1) - 0.5*z*z - math.Log(m.sd*math.Sqrt(2*math.Pi))
}

// bestPerm returns the assignment (sample stick i → slot p[i] < slots)
// that maximises the summed score of the n active sticks, and that score.
func (a *alignScratch) bestPerm(s, slots int, models *[MaxFibres]slotModel, full bool) ([MaxFibres]int, float64) {
	var sc [MaxFibres][MaxFibres]float64
	n := a.n[s]
	for i := 0; i < n; i++ {
		for j := 0; j < slots; j++ {
			sc[i][j] = models[j].score(a.dir[s][i], float64(a.f[s][i]), full)
		}
	}
	best, bestScore := a.perms[0], math.Inf(-1)
	for _, p := range a.perms {
		tot, ok := 0.0, true
		for i := 0; i < n; i++ {
			if p[i] >= slots {
				ok = false
				break
			}
			tot += sc[i][p[i]]
		}
		if ok && tot > bestScore+1e-12 {
			best, bestScore = p, tot
		}
	}
	return best, bestScore
}

// alignSticks relabels the sticks of voxel v of b (see the comment at the
// top of this file). The samples' values are only moved between slots,
// and only the first m slots are used, m the largest number of sticks of a
// sample (so a voxel whose samples all have two sticks keeps slot 3
// empty). The assignment maximises, per sample, the log-density of its
// sticks under the slots' models (Watson axis, normal fraction): a slot
// holding a well-defined fibre claims only sticks near its axis with a
// fraction like its own, while a diffuse slot (a weak, poorly determined
// second stick) does not steal the main fibre's samples.
func (b *Result) alignSticks(v int, a *alignScratch) {
	S, K := b.Samples, b.Sticks
	if K < 2 {
		return
	}
	counts := [MaxFibres + 1]int{}
	slots := 0
	for s := 0; s < S; s++ {
		k := v*S + s
		n := 0
		for i := 0; i < K; i++ {
			if b.Active[i][k] {
				a.dir[s][n] = unitDir(b.Theta[i][k], b.Phi[i][k])
				a.f[s][n], a.th[s][n], a.ph[s][n] = b.F[i][k], b.Theta[i][k], b.Phi[i][k]
				n++
			}
		}
		a.n[s] = n
		counts[n]++
		slots = max(slots, n)
	}
	// Initial references: the medoid of the samples with the most frequent
	// positive stick count (the sample whose sticks best match everyone
	// else's under the best assignment by cos²), its sticks in slots
	// 0..m−1.
	mode := 0
	for c := 1; c <= K; c++ {
		if counts[c] > 0 && (mode == 0 || counts[c] > counts[mode]) {
			mode = c
		}
	}
	if mode == 0 {
		return // no sticks in any sample
	}
	var models [MaxFibres]slotModel
	medoid, medScore := -1, math.Inf(-1)
	for c := 0; c < S; c++ {
		if a.n[c] != mode {
			continue
		}
		var trial [MaxFibres]slotModel
		for i := 0; i < mode; i++ {
			trial[i] = slotModel{ref: a.dir[c][i], has: true}
		}
		tot := 0.0
		for s := 0; s < S; s++ {
			_, sc := a.bestPerm(s, slots, &trial, false)
			tot += sc
		}
		if tot > medScore {
			medoid, medScore = c, tot
		}
	}
	for i := 0; i < mode; i++ {
		models[i] = slotModel{ref: a.dir[medoid][i], has: true}
	}
	for it := 0; it < alignIterations; it++ {
		full := it > 0
		var T [MaxFibres][9]float64
		var cnt [MaxFibres]int
		var fs, fss [MaxFibres]float64
		changed := false
		for s := 0; s < S; s++ {
			p, _ := a.bestPerm(s, slots, &models, full)
			for i := 0; i < a.n[s]; i++ {
				if a.slot[s][i] != p[i] {
					changed = true
				}
				a.slot[s][i] = p[i]
				d := a.dir[s][i]
				for x := range 3 {
					for y := range 3 {
						T[p[i]][3*x+y] += d[x] * d[y]
					}
				}
				cnt[p[i]]++
				f := float64(a.f[s][i])
				fs[p[i]] += f
				fss[p[i]] += f * f
			}
		}
		if !changed && it > 1 {
			break
		}
		for j := 0; j < slots; j++ {
			if cnt[j] == 0 {
				continue
			}
			m := &models[j]
			m.ref, m.has = principalAxis(T[j], m.ref, m.has), true
			c := float64(cnt[j])
			var dev float64 // E[1 − cos²] = 1 − rᵀ T r / c
			for x := range 3 {
				for y := range 3 {
					dev += m.ref[x] * T[j][3*x+y] * m.ref[y]
				}
			}
			dev = 1 - dev/c
			m.kappa = max(minKappa, 1/math.Max(dev, 1e-6))
			m.mu = fs[j] / c
			m.sd = math.Max(minFracSD, math.Sqrt(math.Max(fss[j]/c-m.mu*m.mu, 0)))
		}
	}
	// Order the slots by decreasing mean fraction (absent = 0).
	var mean [MaxFibres]float64
	for s := 0; s < S; s++ {
		for i := 0; i < a.n[s]; i++ {
			mean[a.slot[s][i]] += float64(a.f[s][i])
		}
	}
	order := make([]int, K)
	for j := range order {
		order[j] = j
	}
	sort.SliceStable(order, func(x, y int) bool { return mean[order[x]] > mean[order[y]] })
	var rank [MaxFibres]int
	for r, j := range order {
		rank[j] = r
	}
	for s := 0; s < S; s++ {
		k := v*S + s
		for i := 0; i < K; i++ {
			b.F[i][k], b.Theta[i][k], b.Phi[i][k], b.Active[i][k] = 0, 0, 0, false
		}
		for i := 0; i < a.n[s]; i++ {
			j := rank[a.slot[s][i]]
			b.F[j][k], b.Theta[j][k], b.Phi[j][k], b.Active[j][k] = a.f[s][i], a.th[s][i], a.ph[s][i], true
		}
	}
}

// principalAxis returns the unit eigenvector of the largest eigenvalue of
// the symmetric positive semi-definite 3×3 matrix T (row-major), by power
// iteration from start (or from the largest column of T when start is
// unset); a 3×3 power iteration converges to 1e-12 in a few dozen steps
// unless the two largest eigenvalues are nearly equal, when either axis
// serves as a reference.
func principalAxis(T [9]float64, start [3]float64, ok bool) [3]float64 {
	v := start
	if !ok || v == ([3]float64{}) {
		best := -1.0
		for c := range 3 {
			if T[4*c] > best {
				best = T[4*c]
				v = [3]float64{T[c], T[3+c], T[6+c]}
			}
		}
	}
	for it := 0; it < 100; it++ {
		var w [3]float64
		for x := range 3 {
			w[x] = T[3*x]*v[0] + T[3*x+1]*v[1] + T[3*x+2]*v[2]
		}
		n := math.Sqrt(w[0]*w[0] + w[1]*w[1] + w[2]*w[2])
		if n == 0 {
			return v
		}
		w = [3]float64{w[0] / n, w[1] / n, w[2] / n}
		d := math.Abs(w[0]*v[0] + w[1]*v[1] + w[2]*v[2])
		v = w
		if d > 1-1e-14 {
			break
		}
	}
	return v
}
