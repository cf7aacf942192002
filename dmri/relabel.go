package dmri

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

// bestPerm returns the permutation (sample stick i → slot p[i]) that
// maximises Σ_i cos²(stick i, ref[p[i]]) over the n active sticks, with
// slots whose reference is undefined (has[slot] false) scoring 0, and that
// score.
func (a *alignScratch) bestPerm(dirs *[MaxFibres][3]float64, n int, ref *[MaxFibres][3]float64, has *[MaxFibres]bool) ([MaxFibres]int, float64) {
	best, bestScore := a.perms[0], -1.0
	for _, p := range a.perms {
		sc := 0.0
		for i := 0; i < n; i++ {
			if has[p[i]] {
				sc += cos2(dirs[i], ref[p[i]])
			}
		}
		if sc > bestScore+1e-12 {
			best, bestScore = p, sc
		}
	}
	return best, bestScore
}

// alignSticks relabels the sticks of voxel v of b (see the comment at the
// top of this file). The samples' values are only moved between slots; a
// voxel whose samples hold at most one stick each keeps its labels up to
// the final ordering.
func (b *Batch) alignSticks(v int, a *alignScratch) {
	S, K := b.Samples, b.Sticks
	if K < 2 {
		return
	}
	counts := [MaxFibres + 1]int{}
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
	}
	// Initial references: the medoid of the samples with the most frequent
	// positive stick count (the sample whose sticks best match everyone
	// else's under the best permutation), its sticks in slots 0..m−1.
	mode := 0
	for c := 1; c <= K; c++ {
		if counts[c] > 0 && (mode == 0 || counts[c] > counts[mode]) {
			mode = c
		}
	}
	if mode == 0 {
		return // no sticks in any sample
	}
	var ref [MaxFibres][3]float64
	var has [MaxFibres]bool
	medoid, medScore := -1, -1.0
	for c := 0; c < S; c++ {
		if a.n[c] != mode {
			continue
		}
		var r [MaxFibres][3]float64
		var h [MaxFibres]bool
		for i := 0; i < mode; i++ {
			r[i], h[i] = a.dir[c][i], true
		}
		tot := 0.0
		for s := 0; s < S; s++ {
			_, sc := a.bestPerm(&a.dir[s], a.n[s], &r, &h)
			tot += sc
		}
		if tot > medScore {
			medoid, medScore = c, tot
		}
	}
	for i := 0; i < mode; i++ {
		ref[i], has[i] = a.dir[medoid][i], true
	}
	for it := 0; it < alignIterations; it++ {
		var T [MaxFibres][9]float64
		var cnt [MaxFibres]int
		changed := false
		for s := 0; s < S; s++ {
			p, _ := a.bestPerm(&a.dir[s], a.n[s], &ref, &has)
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
			}
		}
		if !changed && it > 0 {
			break
		}
		for j := 0; j < K; j++ {
			if cnt[j] > 0 {
				ref[j], has[j] = principalAxis(T[j], ref[j], has[j]), true
			}
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
