package posterior

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/engine/kernels"
	"github.com/prismsbi/prism/network"
)

// SampleOptions configure the parameter sampler and the ODE log-density.
type SampleOptions struct {
	Options
	// Steps is the number of solver steps (the schedule has Steps+1
	// noise levels); default 64.
	Steps int
	// SigmaMin and SigmaMax bound the Karras schedule; defaults 2e−3 and
	// 80. Samples are returned at σ_min (no final denoising step), so
	// they carry N(0, σ_min²) noise and log q is their exact density.
	SigmaMin, SigmaMax float64
	// Rho is the Karras schedule exponent; default 7.
	Rho float64
	// Solver is the ODE integrator; default AB2.
	Solver Solver
}

// Defaults of SampleOptions.
const (
	DefaultSteps    = 64
	DefaultSigmaMin = 2e-3
	DefaultSigmaMax = 80
	DefaultRho      = 7
)

func (o SampleOptions) withDefaults() (SampleOptions, error) {
	if o.Steps == 0 {
		o.Steps = DefaultSteps
	}
	if o.SigmaMin == 0 {
		o.SigmaMin = DefaultSigmaMin
	}
	if o.SigmaMax == 0 {
		o.SigmaMax = DefaultSigmaMax
	}
	if o.Rho == 0 {
		o.Rho = DefaultRho
	}
	if o.Steps < 1 || !(o.SigmaMin > 0) || !(o.SigmaMax > o.SigmaMin) || !(o.Rho > 0) {
		return o, fmt.Errorf("posterior: sampler settings steps %d, σ ∈ [%v, %v], ρ %v", o.Steps, o.SigmaMin, o.SigmaMax, o.Rho)
	}
	return o, nil
}

// ThetaSet holds parameter samples of one observation: Theta[j] (latent,
// length DMax, zero on inactive dimensions) was drawn under Masks[j];
// LogQ[j] is log q(θ_j | M_j, x) on the active dimensions when computed.
type ThetaSet struct {
	Masks [][]bool
	Theta [][]float64
	LogQ  []float64
}

// netDenoiser is the network's denoiser for one chunk: Be encoded
// observations with r rows each. Plain evaluations run per distinct mask
// on that mask's active tokens (network.DenoiseMasked); evaluations with a
// Jacobian run the whole chunk through network.Denoise.
type netDenoiser struct {
	net    *network.Net
	enc    *engine.Tensor
	masks  [][]bool
	active []bool // rows·dm
	used   []bool // dimension j active in some row
	dm     int
	th     []float32
	seed   []float32
	groups []maskGroup
	cross  *network.ParamCross // cross-attention keys/values of enc, on enc's graph
	order  []int               // groups by decreasing size: the order cores claim them in
	graphs sync.Pool           // inference graphs for plain evaluations, one per core at a time
	gt     *engine.Graph       // training graph for the Jacobian trace
}

// rawDenoiser returns the network's denoiser (or the test hook's) for the
// rows of a chunk: encoder tokens enc on encG, r rows per observation,
// rowObs giving each row's observation index (for the hook).
func (p *Posterior) rawDenoiser(encG *engine.Graph, enc *engine.Tensor, rowMasks [][]bool, active []bool, r int, rowObs func(row int) int) Denoiser {
	if p.denoiserHook != nil {
		idx := make([]int, len(rowMasks))
		for row := range idx {
			idx[row] = rowObs(row)
		}
		return p.denoiserHook(idx, rowMasks, active)
	}
	return newNetDenoiser(p.net, encG, enc, rowMasks, active, p.dmax, r)
}

// denoiser is rawDenoiser with p's denoiser calibration, if any.
func (p *Posterior) denoiser(encG *engine.Graph, enc *engine.Tensor, rowMasks [][]bool, active []bool, r int, rowObs func(row int) int) Denoiser {
	d := p.rawDenoiser(encG, enc, rowMasks, active, r, rowObs)
	if p.cal != nil {
		d = calibratedDenoiser{inner: d, cal: p.cal, active: active, dm: p.dmax}
	}
	return d
}

// maskGroup lists the rows of a chunk that share one mask and their
// observations (non-decreasing).
type maskGroup struct {
	rows, obs []int
}

// newNetDenoiser evaluates net on the encoder tokens enc (owned by encG,
// which also receives the cross-attention keys and values) for rows of
// rowsPerObs masks per observation.
func newNetDenoiser(net *network.Net, encG *engine.Graph, enc *engine.Tensor, masks [][]bool, active []bool, dm, rowsPerObs int) *netDenoiser {
	d := &netDenoiser{net: net, enc: enc, cross: net.ParamCrossKV(encG, enc), masks: masks, active: active, dm: dm,
		th: make([]float32, len(active)), used: make([]bool, dm)}
	for i, a := range active {
		if a {
			d.used[i%dm] = true
		}
	}
	index := map[string]int{}
	key := make([]byte, 0, 64)
	for row, m := range masks {
		key = key[:0]
		for _, on := range m {
			if on {
				key = append(key, 1)
			} else {
				key = append(key, 0)
			}
		}
		gi, ok := index[string(key)]
		if !ok {
			gi = len(d.groups)
			index[string(key)] = gi
			d.groups = append(d.groups, maskGroup{})
		}
		d.groups[gi].rows = append(d.groups[gi].rows, row)
		d.groups[gi].obs = append(d.groups[gi].obs, row/rowsPerObs)
	}
	d.order = make([]int, len(d.groups))
	for i := range d.order {
		d.order[i] = i
	}
	sort.SliceStable(d.order, func(a, b int) bool { return len(d.groups[d.order[a]].rows) > len(d.groups[d.order[b]].rows) })
	return d
}

func (d *netDenoiser) Denoise(theta []float64, sigma float64, out, jac []float64) error {
	for i, v := range theta {
		d.th[i] = float32(v)
	}
	rows := len(d.masks)
	sig := []float64{sigma}
	if jac == nil {
		return d.denoiseGroups(sigma, out)
	}
	if d.gt == nil {
		d.gt = engine.NewGraph()
		d.seed = make([]float32, len(d.th))
	}
	g := d.gt
	g.Reset()
	x := g.Variable(d.th, rows, d.dm)
	res, err := d.net.Denoise(g, d.enc, d.masks, x, sig)
	if err != nil {
		return fmt.Errorf("posterior: %w", err)
	}
	for i, v := range res.Data {
		out[i] = float64(v)
	}
	// One VJP per used dimension j with e_j in every row gives row j of
	// every row's Jacobian, ∂D[b, j]/∂θ[b, ·], at once (rows are
	// independent in the network).
	dm := d.dm
	for j, u := range d.used {
		if !u {
			continue
		}
		clear(d.seed)
		for r := range rows {
			d.seed[r*dm+j] = 1
		}
		g.BackwardFrom(res, d.seed)
		for r := range rows {
			row := jac[(r*dm+j)*dm : (r*dm+j+1)*dm]
			for k, v := range x.Grad[r*dm : (r+1)*dm] {
				row[k] = float64(v)
			}
		}
	}
	return nil
}

// denoiseGroups evaluates every mask group at noise level σ into out. The
// cores claim groups from a shared counter, largest first, each group
// running whole on the core that claimed it (with its own graph), so that
// the many small groups of a brain-like chunk are evaluated side by side
// instead of each one's kernels being split over the cores; a large group
// still splits into row chunks inside network.DenoiseMasked.
func (d *netDenoiser) denoiseGroups(sigma float64, out []float64) error {
	dm := d.dm
	var (
		next atomic.Int64
		mu   sync.Mutex
		err  error
	)
	kernels.ParallelFor(runtime.GOMAXPROCS(0), func(_, _ int) {
		g, _ := d.graphs.Get().(*engine.Graph)
		if g == nil {
			g = engine.NewInferenceGraph()
		}
		defer d.graphs.Put(g)
		for {
			i := int(next.Add(1) - 1)
			if i >= len(d.order) {
				return
			}
			gr := &d.groups[d.order[i]]
			g.Reset()
			x := g.Zeros(len(gr.rows), dm)
			for a, row := range gr.rows {
				copy(x.Data[a*dm:(a+1)*dm], d.th[row*dm:(row+1)*dm])
			}
			res, e := d.net.DenoiseMasked(g, d.enc, d.cross, d.masks[gr.rows[0]], gr.obs, x, sigma)
			if e != nil {
				mu.Lock()
				err = cmp.Or(err, fmt.Errorf("posterior: %w", e))
				mu.Unlock()
				return
			}
			for a, row := range gr.rows {
				for j, v := range res.Data[a*dm : (a+1)*dm] {
					out[row*dm+j] = float64(v)
				}
			}
		}
	})
	return err
}

// thetaJob runs the sampler or the density evaluation chunk by chunk.
// masks[i] lists observation i's masks (one row each); theta, if non-nil,
// holds given parameters to score (LogProbTheta), otherwise parameters
// are sampled.
func (p *Posterior) thetaJob(obs []Observation, masks [][][]bool, given [][][]float64, logProb bool, so SampleOptions) ([]ThetaSet, error) {
	if err := p.checkObs(obs); err != nil {
		return nil, err
	}
	so, err := so.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(masks) != len(obs) {
		return nil, fmt.Errorf("posterior: %d mask lists for %d observations", len(masks), len(obs))
	}
	for i := range masks {
		if len(masks[i]) == 0 {
			return nil, fmt.Errorf("posterior: no masks for observation %d", i)
		}
		for _, m := range masks[i] {
			if err := p.checkMask(m); err != nil {
				return nil, err
			}
		}
		if given != nil {
			if len(given[i]) != len(masks[i]) {
				return nil, fmt.Errorf("posterior: observation %d has %d parameter vectors for %d masks", i, len(given[i]), len(masks[i]))
			}
			for _, th := range given[i] {
				if len(th) != p.dmax {
					return nil, fmt.Errorf("posterior: parameter vector of length %d, want %d", len(th), p.dmax)
				}
			}
		}
	}
	sigmas := KarrasSigmas(so.Steps, so.SigmaMin, so.SigmaMax, so.Rho)
	if given != nil { // density evaluation runs from σ_min up to σ_max
		for i, j := 0, len(sigmas)-1; i < j; i, j = i+1, j-1 {
			sigmas[i], sigmas[j] = sigmas[j], sigmas[i]
		}
	}
	out := make([]ThetaSet, len(obs))
	for i := range out {
		n := len(masks[i])
		out[i].Masks = masks[i]
		out[i].Theta = make([][]float64, n)
		flat := make([]float64, n*p.dmax)
		for j := range out[i].Theta {
			out[i].Theta[j] = flat[j*p.dmax : (j+1)*p.dmax]
		}
		if logProb {
			out[i].LogQ = make([]float64, n)
		}
	}
	def := defaultChunkRows
	if logProb {
		def = defaultTraceChunkRows
	}
	dm := p.dmax
	encG := engine.NewInferenceGraph()
	var pcg rand.PCG
	rng := rand.New(&pcg)
	for _, gr := range groupObservations(obs, func(i int) int { return len(masks[i]) }) {
		for _, ch := range gr.chunks(so.chunkRows(def)) {
			encG.Reset()
			enc, err := p.net.Encode(encG, ch.observations(obs))
			if err != nil {
				return nil, fmt.Errorf("posterior: %w", err)
			}
			r := ch.hi - ch.lo
			rows := len(ch.idx) * r
			rowMasks := make([][]bool, 0, rows)
			active := make([]bool, rows*dm)
			theta := make([]float64, rows*dm)
			for a, i := range ch.idx {
				for j := ch.lo; j < ch.hi; j++ {
					row := a*r + j - ch.lo
					m := masks[i][j]
					rowMasks = append(rowMasks, m)
					act := active[row*dm : (row+1)*dm]
					p.layout.Active(m, act)
					th := theta[row*dm : (row+1)*dm]
					if given != nil {
						copy(th, given[i][j])
					} else {
						// Initial noise N(0, σ_max²+1) from the stream of
						// (observation, sample), independent of chunking.
						pcg.Seed(streamSeed(so.Seed, tagTheta, so.Offset+uint64(i), uint64(j)))
						sd := math.Sqrt(so.SigmaMax*so.SigmaMax + 1)
						for k := range th {
							th[k] = sd * rng.NormFloat64()
						}
					}
					for k, a := range act {
						if !a {
							th[k] = 0
						}
					}
				}
			}
			den := p.denoiser(encG, enc, rowMasks, active, r, func(row int) int { return ch.idx[row/r] })
			var delta []float64
			var base []float64
			if logProb {
				delta = make([]float64, rows)
				if given == nil {
					base = make([]float64, rows)
					for row := range rows {
						base[row] = BaseLogProb(theta[row*dm:(row+1)*dm], active[row*dm:(row+1)*dm], so.SigmaMax)
					}
				}
			}
			if err := Flow(den, so.Solver, sigmas, theta, active, dm, delta); err != nil {
				return nil, err
			}
			for a, i := range ch.idx {
				for j := ch.lo; j < ch.hi; j++ {
					row := a*r + j - ch.lo
					th := theta[row*dm : (row+1)*dm]
					if given != nil {
						if logProb {
							// θ_end = Φ(θ) is at σ_max: log q(θ) = log N(Φ(θ)) + log|det ∂Φ/∂θ|.
							out[i].LogQ[j] = BaseLogProb(th, active[row*dm:(row+1)*dm], so.SigmaMax) + delta[row]
						}
						copy(out[i].Theta[j], given[i][j])
						continue
					}
					copy(out[i].Theta[j], th)
					if logProb {
						out[i].LogQ[j] = base[row] - delta[row]
					}
				}
			}
		}
	}
	return out, nil
}

// SampleTheta draws one parameter vector from q(θ | M, x) for every mask
// of masks[i] (observation i), integrating the probability-flow ODE from
// σ_max to σ_min. Repeat(mask, n) gives n samples under one model.
// Sample j of observation i starts from the noise of stream
// (Seed, Offset+i, j), so the samples do not depend on chunking.
func (p *Posterior) SampleTheta(obs []Observation, masks [][][]bool, so SampleOptions) ([]ThetaSet, error) {
	return p.thetaJob(obs, masks, nil, false, so)
}

// SampleAndLogProb is SampleTheta that also returns log q(θ | M, x) of
// each sample: the base density N(0, σ_max²+1) minus the log-determinant
// of the solver's map, from the exact Jacobian of every step on the
// active dimensions (one VJP per latent dimension and network
// evaluation; see Flow). It is the density of the returned samples up to
// float32 rounding, at any step count.
func (p *Posterior) SampleAndLogProb(obs []Observation, masks [][][]bool, so SampleOptions) ([]ThetaSet, error) {
	return p.thetaJob(obs, masks, nil, true, so)
}

// LogProbTheta returns log q(θ | M, x) of given parameters thetas[i][j]
// (latent, length DMax) under masks[i][j] by integrating the ODE from
// σ_min up to σ_max (the same schedule reversed) with exact Jacobians:
// log N(Φ(θ); 0, σ_max²+1) + log|det ∂Φ/∂θ|. Unlike SampleAndLogProb this
// is the density of the continuous probability-flow model, so it carries
// the solver's discretisation error (TestGaussianSampler measures it).
func (p *Posterior) LogProbTheta(obs []Observation, masks [][][]bool, thetas [][][]float64, so SampleOptions) ([][]float64, error) {
	if len(thetas) != len(obs) {
		return nil, fmt.Errorf("posterior: %d parameter lists for %d observations", len(thetas), len(obs))
	}
	ts, err := p.thetaJob(obs, masks, thetas, true, so)
	if err != nil {
		return nil, err
	}
	out := make([][]float64, len(ts))
	for i := range ts {
		out[i] = ts[i].LogQ
	}
	return out, nil
}

// JointSet is a joint posterior sample set of one observation: masks from
// q(M | x, λ) with their log q, then one θ per mask from q(θ | M, x).
type JointSet struct {
	MaskSet
	Theta [][]float64
	// LogQTheta is log q(θ | M, x) when requested.
	LogQTheta []float64
}

// SampleJoint draws n joint samples per observation: M ~ q(M | x, λ)
// then θ ~ q(θ | M, x); withLogProb also integrates log q(θ | M, x).
func (p *Posterior) SampleJoint(obs []Observation, lambda float64, n int, withLogProb bool, so SampleOptions) ([]JointSet, error) {
	ms, err := p.SampleMasks(obs, lambda, n, so.Options)
	if err != nil {
		return nil, err
	}
	masks := make([][][]bool, len(obs))
	for i := range ms {
		masks[i] = ms[i].Masks
	}
	ts, err := p.thetaJob(obs, masks, nil, withLogProb, so)
	if err != nil {
		return nil, err
	}
	out := make([]JointSet, len(obs))
	for i := range out {
		out[i] = JointSet{MaskSet: ms[i], Theta: ts[i].Theta, LogQTheta: ts[i].LogQ}
	}
	return out, nil
}
