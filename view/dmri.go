package view

import (
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/dti"
	"github.com/prismsbi/prism/nifti"
	"github.com/prismsbi/prism/plot"
	"github.com/prismsbi/prism/posterior"
)

// DMRISettings configure the diffusion-MRI explorer.
type DMRISettings struct {
	// Lambda is the λ of the maps shown at start (a fit folder's own λ
	// replaces it).
	Lambda float64 `json:"lambda"`
	// VoxelSamples, Steps and Solver: joint samples (model, then
	// parameters), ODE steps and solver behind a clicked voxel's fibre
	// directions, as `prism dmri fit --samples --steps --solver`; Seed as
	// its --seed.
	VoxelSamples int    `json:"voxel_samples"`
	Steps        int    `json:"steps"`
	Solver       string `json:"solver"`
	Seed         uint64 `json:"seed"`
}

// DefaultDMRISettings returns the defaults of `prism dmri fit`: λ = 0.3,
// 50 samples × 8 AB2 steps, seed 1.
func DefaultDMRISettings() DMRISettings {
	d := dmrifit.DefaultFitSettings()
	return DMRISettings{Lambda: d.Lambda, VoxelSamples: d.Samples, Steps: d.Steps, Solver: d.Solver, Seed: d.Seed}
}

// fitSettings are the settings of a fit at λ.
func (s DMRISettings) fitSettings(lambda float64) dmrifit.FitSettings {
	return dmrifit.FitSettings{Lambda: lambda, Samples: s.VoxelSamples, Steps: s.Steps, Solver: s.Solver, Seed: s.Seed, BatchSize: 1}
}

// Axes of the slice views: a slice of axis a holds the voxels whose
// a-th coordinate is fixed (0: sagittal x, 1: coronal y, 2: axial z).
const (
	Sagittal = 0
	Coronal  = 1
	Axial    = 2
)

// DMRI is the explorer of one scan with a trained ball-and-sticks
// network. It keeps, for every fitted voxel, the model posterior of the
// maps (from a fit folder, or refitted slice by slice) and the tensor
// fit's FA and principal direction. Its methods are safe for concurrent
// use.
type DMRI struct {
	mu      sync.Mutex // guards prob and lambda
	compute sync.Mutex // serialises the use of post
	scan    *dmrifit.Scan
	post    *posterior.Posterior
	set     DMRISettings
	models  []dmrifit.Model
	sticks  int
	comps   []string
	pos     []int32   // grid index → position in scan.Voxels, −1 outside
	fa      []float32 // grid, NaN outside the fitted voxels
	v1      [][3]float32
	prob    []float32 // grid × models, NaN where not fitted
	lambda  []float32 // grid: λ of prob, NaN where not fitted
	maps    []MapInfo
	source  string
}

// MapInfo names one map of the slice views.
type MapInfo struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// NewDMRI prepares the explorer of scan with the network post (a b3s-like
// family, see dmrifit.NewFitter). folder, if not empty, is a `prism dmri
// fit` output folder on the same grid whose model_prob maps are shown at
// start; otherwise the three middle slices are fitted at set.Lambda
// (the page opens on them). source names the network in the page.
func NewDMRI(scan *dmrifit.Scan, post *posterior.Posterior, folder, source string, set DMRISettings) (*DMRI, error) {
	if len(scan.Voxels) == 0 {
		return nil, fmt.Errorf("view: %s: no voxel to fit in the mask", scan.Files.DWI)
	}
	ft, err := dmrifit.NewFitter(post, set.fitSettings(set.Lambda))
	if err != nil {
		return nil, fmt.Errorf("view: %s: %w", source, err)
	}
	nv := scan.NumVoxels()
	d := &DMRI{scan: scan, post: post, set: set, models: ft.Models, sticks: ft.Sticks, source: source,
		pos: make([]int32, nv), fa: make([]float32, nv), v1: make([][3]float32, nv),
		prob: make([]float32, nv*len(ft.Models)), lambda: make([]float32, nv)}
	for _, c := range post.Family().Components() {
		d.comps = append(d.comps, c.Name)
	}
	nan := float32(math.NaN())
	for i := range d.pos {
		d.pos[i], d.fa[i], d.lambda[i] = -1, nan, nan
	}
	for i := range d.prob {
		d.prob[i] = nan
	}
	for v, i := range scan.Voxels {
		d.pos[i] = int32(v)
	}
	if err := d.fitTensors(); err != nil {
		return nil, err
	}
	d.maps = []MapInfo{{"fa", "FA (tensor fit)"}, {"dec", "direction-encoded colour (tensor V1 × FA)"}}
	for k := range d.sticks + 1 {
		d.maps = append(d.maps, MapInfo{fmt.Sprintf("nfibres:%d", k), fmt.Sprintf("nfibres_prob: P(%d fibres)", k)})
	}
	for m, mod := range d.models {
		d.maps = append(d.maps, MapInfo{fmt.Sprintf("model:%d", m), "model_prob: " + mod.Name})
	}
	for k, c := range d.comps {
		d.maps = append(d.maps, MapInfo{fmt.Sprintf("comp:%d", k), "component: P(" + c + " present)"})
	}
	if folder != "" {
		if err := d.readFolder(folder); err != nil {
			return nil, err
		}
	} else if _, err := d.Refit(set.Lambda, scan.Nx/2, scan.Ny/2, scan.Nz/2, []int{Sagittal, Coronal, Axial}); err != nil {
		return nil, err
	}
	return d, nil
}

// fitTensors fits the diffusion tensor to every voxel (package dti):
// the FA and direction-encoded colour maps.
func (d *DMRI) fitTensors() error {
	s := d.scan
	ft, err := dti.NewFitter(s.Design, dti.DefaultWLSIterations)
	if err != nil {
		return fmt.Errorf("view: tensor fit: %w", err)
	}
	fits := make([]dti.Fit, len(s.Voxels))
	errs := make([]error, len(s.Voxels))
	if err := ft.FitVoxels(s.Signal, fits, errs, runtime.GOMAXPROCS(0)); err != nil {
		return fmt.Errorf("view: tensor fit: %w", err)
	}
	for v, i := range s.Voxels {
		if errs[v] != nil {
			continue
		}
		d.fa[i] = float32(fits[v].FA)
		for c := range 3 {
			d.v1[i][c] = float32(fits[v].V[0][c])
		}
	}
	return nil
}

// readFolder loads the model posterior maps of a `prism dmri fit`
// folder: model_prob.json must list the same models.
func (d *DMRI) readFolder(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "model_prob.json"))
	if err != nil {
		return fmt.Errorf("view: fit folder: %w", err)
	}
	var side dmrifit.ModelSidecar
	if err := json.Unmarshal(b, &side); err != nil {
		return fmt.Errorf("view: %s: %w", filepath.Join(dir, "model_prob.json"), err)
	}
	fam := d.post.Family().Name()
	if side.Family != fam || len(side.Models) != len(d.models) {
		return fmt.Errorf("view: %s: fit of family %s with %d models, the network is %s with %d", dir, side.Family, len(side.Models), fam, len(d.models))
	}
	for m := range d.models {
		if side.Models[m].Name != d.models[m].Name {
			return fmt.Errorf("view: %s: model %d is %s, the network's is %s", dir, m+1, side.Models[m].Name, d.models[m].Name)
		}
	}
	path := filepath.Join(dir, "model_prob"+dmrifit.OutputExt)
	img, err := nifti.Read(path)
	if err != nil {
		return fmt.Errorf("view: fit folder: %w", err)
	}
	nx, ny, nz, nt := img.Shape()
	s := d.scan
	if nx != s.Nx || ny != s.Ny || nz != s.Nz || nt != len(d.models) {
		return fmt.Errorf("view: %s is %d×%d×%d×%d, the scan %d×%d×%d with %d models", path, nx, ny, nz, nt, s.Nx, s.Ny, s.Nz, len(d.models))
	}
	nv, M := s.NumVoxels(), len(d.models)
	for i := range nv {
		if d.pos[i] < 0 {
			continue
		}
		var sum float32
		for m := range M {
			sum += img.Data[i+m*nv]
		}
		if !(sum > 0) { // not fitted in this folder (e.g. a slab)
			continue
		}
		for m := range M {
			d.prob[i*M+m] = img.Data[i+m*nv]
		}
		d.lambda[i] = float32(side.Lambda)
	}
	d.set.Lambda = side.Lambda
	return nil
}

// DMRIInfo describes the scan for the page.
type DMRIInfo struct {
	Grid    [3]int    `json:"grid"`
	Voxels  int       `json:"voxels"`
	Volumes int       `json:"volumes"`
	Lambda  float64   `json:"lambda"`
	Source  string    `json:"source"`
	DWI     string    `json:"dwi"`
	Maps    []MapInfo `json:"maps"`
	Models  []string  `json:"models"`
}

// Info returns the scan's description and the list of maps.
func (d *DMRI) Info() DMRIInfo {
	s := d.scan
	inf := DMRIInfo{Grid: [3]int{s.Nx, s.Ny, s.Nz}, Voxels: len(s.Voxels), Volumes: s.Design.N, Lambda: d.set.Lambda,
		Source: d.source, DWI: filepath.Base(s.Files.DWI), Maps: d.maps}
	for _, m := range d.models {
		inf.Models = append(inf.Models, m.Name)
	}
	return inf
}

// fitter returns a fitter at λ with the explorer's settings.
func (d *DMRI) fitter(lambda float64) (*dmrifit.Fitter, error) {
	ft, err := dmrifit.NewFitter(d.post, d.set.fitSettings(lambda))
	if err != nil {
		return nil, fmt.Errorf("view: %w", err)
	}
	return ft, nil
}

// RefitResult reports one refit.
type RefitResult struct {
	Lambda  float64 `json:"lambda"`
	Voxels  int     `json:"voxels"` // voxels computed (those already at λ are kept)
	Seconds float64 `json:"seconds"`
}

// Refit computes the model posterior q(M | x, λ) (dmrifit.Fitter's
// ModelPosterior, the model_prob of `prism dmri fit --lambda`) of every
// fitted voxel in the slices through (x, y, z) along the given axes
// whose maps are not already at this λ.
func (d *DMRI) Refit(lambda float64, x, y, z int, axes []int) (*RefitResult, error) {
	s := d.scan
	if x < 0 || y < 0 || z < 0 || x >= s.Nx || y >= s.Ny || z >= s.Nz {
		return nil, fmt.Errorf("view: voxel (%d, %d, %d) outside the %d×%d×%d grid", x, y, z, s.Nx, s.Ny, s.Nz)
	}
	ft, err := d.fitter(lambda)
	if err != nil {
		return nil, err
	}
	at := [3]int{x, y, z}
	start := time.Now()
	sub := *s
	sub.Voxels, sub.Signal = nil, nil
	N := s.Design.N
	for _, a := range axes {
		if a < 0 || a > 2 {
			return nil, fmt.Errorf("view: slice axis %d, want 0, 1 or 2", a)
		}
	}
	d.mu.Lock()
	done := slices.Clone(d.lambda)
	d.mu.Unlock()
	for v, i := range s.Voxels {
		if done[i] == float32(lambda) {
			continue
		}
		c := d.coords(i)
		for _, a := range axes {
			if c[a] == at[a] {
				sub.Voxels = append(sub.Voxels, i)
				sub.Signal = append(sub.Signal, s.Signal[v*N:(v+1)*N]...)
				break
			}
		}
	}
	res := &RefitResult{Lambda: lambda, Voxels: len(sub.Voxels)}
	if len(sub.Voxels) == 0 {
		return res, nil
	}
	d.compute.Lock()
	prob, _, err := ft.ModelPosterior(&sub, 0, len(sub.Voxels))
	d.compute.Unlock()
	if err != nil {
		return nil, fmt.Errorf("view: refit: %w", err)
	}
	M := len(d.models)
	d.mu.Lock()
	for v, i := range sub.Voxels {
		copy(d.prob[i*M:(i+1)*M], prob[v*M:(v+1)*M])
		d.lambda[i] = float32(lambda)
	}
	d.mu.Unlock()
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// coords returns the grid coordinates of linear index i.
func (d *DMRI) coords(i int) [3]int {
	s := d.scan
	return [3]int{i % s.Nx, (i / s.Nx) % s.Ny, i / (s.Nx * s.Ny)}
}

// SliceSize returns the width and height in voxels of a slice view of
// axis a: sagittal y × z, coronal x × z, axial x × y.
func (d *DMRI) SliceSize(a int) (w, h int) {
	s := d.scan
	switch a {
	case Sagittal:
		return s.Ny, s.Nz
	case Coronal:
		return s.Nx, s.Nz
	}
	return s.Nx, s.Ny
}

// voxelAt maps pixel (u, v) of a slice view (v = 0 at the top, the
// superior or anterior edge) of axis a through index to a grid index.
func (d *DMRI) voxelAt(a, index, u, v int) int {
	s := d.scan
	_, h := d.SliceSize(a)
	r := h - 1 - v
	switch a {
	case Sagittal:
		return index + s.Nx*(u+s.Ny*r)
	case Coronal:
		return u + s.Nx*(index+s.Ny*r)
	}
	return u + s.Nx*(r+s.Ny*index)
}

// Background colours of the slice views.
var (
	outsideColour = color.NRGBA{0, 0, 0, 0xff}          // not a fitted voxel
	pendingColour = color.NRGBA{0x30, 0x30, 0x30, 0xff} // fitted voxel whose model posterior is not computed yet
)

// Slice renders map id on the slice of axis a through index, one pixel
// per voxel (the page scales it up): scalar maps in [0, 1] with viridis,
// "dec" as |V1|·FA in RGB.
func (d *DMRI) Slice(id string, a, index int) (*image.NRGBA, error) {
	if a < 0 || a > 2 {
		return nil, fmt.Errorf("view: slice axis %d, want 0, 1 or 2", a)
	}
	s := d.scan
	if n := [3]int{s.Nx, s.Ny, s.Nz}[a]; index < 0 || index >= n {
		return nil, fmt.Errorf("view: slice %d outside 0…%d", index, n-1)
	}
	var value func(int) float64
	if id != "dec" {
		var err error
		if value, err = d.mapValue(id); err != nil {
			return nil, err
		}
	}
	w, h := d.SliceSize(a)
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	d.mu.Lock()
	defer d.mu.Unlock()
	for v := range h {
		for u := range w {
			i := d.voxelAt(a, index, u, v)
			c := outsideColour
			if d.pos[i] >= 0 {
				if id == "dec" {
					c = d.decColour(i)
				} else if t := value(i); math.IsNaN(t) {
					c = pendingColour
				} else {
					c = plot.Viridis.Color(t)
				}
			}
			img.SetNRGBA(u, v, c)
		}
	}
	return img, nil
}

// decColour is the direction-encoded colour of voxel i: |V1| (x red, y
// green, z blue) scaled by FA.
func (d *DMRI) decColour(i int) color.NRGBA {
	fa := d.fa[i]
	if math.IsNaN(float64(fa)) {
		return pendingColour
	}
	var c [3]uint8
	for k := range 3 {
		c[k] = uint8(math.Round(255 * math.Min(1, float64(fa)*math.Abs(float64(d.v1[i][k])))))
	}
	return color.NRGBA{c[0], c[1], c[2], 0xff}
}

// mapValue returns the scalar of map id (any map but "dec") at a grid
// index, NaN where not computed; the caller holds d.mu while calling it.
func (d *DMRI) mapValue(id string) (func(i int) float64, error) {
	M := len(d.models)
	kind, arg, _ := strings.Cut(id, ":")
	var k int
	if arg != "" {
		if _, err := fmt.Sscanf(arg, "%d", &k); err != nil {
			return nil, fmt.Errorf("view: map %q: %w", id, err)
		}
	}
	switch {
	case id == "fa":
		return func(i int) float64 { return float64(d.fa[i]) }, nil
	case kind == "nfibres" && k >= 0 && k <= d.sticks:
		return func(i int) float64 {
			var p float64
			for m, mod := range d.models {
				if mod.Sticks == k {
					p += float64(d.prob[i*M+m])
				}
			}
			return p
		}, nil
	case kind == "model" && k >= 0 && k < M:
		return func(i int) float64 { return float64(d.prob[i*M+k]) }, nil
	case kind == "comp" && k >= 0 && k < len(d.comps):
		return func(i int) float64 {
			var p float64
			for m, mod := range d.models {
				if mod.Mask[k] {
					p += float64(d.prob[i*M+m])
				}
			}
			return p
		}, nil
	}
	return nil, fmt.Errorf("view: unknown map %q", id)
}

// Direction is one fibre-direction sample of a voxel: a unit vector in
// the b-vectors' frame (docs/dmri.md) with its stick's fraction.
type Direction struct {
	Stick int        `json:"stick"`
	F     float64    `json:"f"`
	Dir   [3]float64 `json:"dir"`
}

// VoxelModel is one model of a voxel's posterior.
type VoxelModel struct {
	Name string  `json:"name"`
	Prob float64 `json:"p"`
}

// Voxel is the posterior of one clicked voxel.
type Voxel struct {
	At          [3]int       `json:"at"`
	Lambda      float64      `json:"lambda"`
	FA          *float64     `json:"fa,omitempty"` // nil where the tensor fit failed
	Models      []VoxelModel `json:"models"`       // most probable first
	NFibresProb []float64    `json:"nfibres_prob"`
	Samples     int          `json:"samples"`
	Directions  []Direction  `json:"directions"`
	Seconds     float64      `json:"seconds"`
}

// Voxel fits voxel (x, y, z) at λ as `prism dmri fit` does (FitBatch with
// this voxel's position in the scan, so the same settings and seed give
// the same samples as the whole-scan fit): its model posterior and the
// direction of every active stick in every joint sample.
func (d *DMRI) Voxel(lambda float64, x, y, z int) (*Voxel, error) {
	s := d.scan
	if x < 0 || y < 0 || z < 0 || x >= s.Nx || y >= s.Ny || z >= s.Nz {
		return nil, fmt.Errorf("view: voxel (%d, %d, %d) outside the %d×%d×%d grid", x, y, z, s.Nx, s.Ny, s.Nz)
	}
	i := x + s.Nx*(y+s.Ny*z)
	v := int(d.pos[i])
	if v < 0 {
		return nil, fmt.Errorf("view: voxel (%d, %d, %d) is not a fitted voxel of the mask", x, y, z)
	}
	ft, err := d.fitter(lambda)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	d.compute.Lock()
	b, err := ft.FitBatch(s, v, 1)
	d.compute.Unlock()
	if err != nil {
		return nil, fmt.Errorf("view: voxel (%d, %d, %d): %w", x, y, z, err)
	}
	out := &Voxel{At: [3]int{x, y, z}, Lambda: lambda, NFibresProb: b.NFibresProb(0, d.models), Samples: b.Samples}
	if fa := float64(d.fa[i]); !math.IsNaN(fa) {
		out.FA = &fa
	}
	for m, mod := range d.models {
		out.Models = append(out.Models, VoxelModel{Name: mod.Name, Prob: float64(b.ModelProb[m])})
	}
	slices.SortStableFunc(out.Models, func(a, b VoxelModel) int {
		switch {
		case a.Prob > b.Prob:
			return -1
		case a.Prob < b.Prob:
			return 1
		}
		return 0
	})
	for st := range b.Sticks {
		for j := range b.Samples {
			if !b.Active[st][j] {
				continue
			}
			th, ph := float64(b.Theta[st][j]), float64(b.Phi[st][j])
			out.Directions = append(out.Directions, Direction{Stick: st + 1, F: float64(b.F[st][j]),
				Dir: [3]float64{math.Sin(th) * math.Cos(ph), math.Sin(th) * math.Sin(ph), math.Cos(th)}})
		}
	}
	out.Seconds = time.Since(start).Seconds()
	return out, nil
}
