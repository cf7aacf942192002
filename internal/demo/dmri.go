package demo

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/prismsbi/prism/data"
	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/internal/progress"
	"github.com/prismsbi/prism/models"
	"github.com/prismsbi/prism/nifti"
	"github.com/prismsbi/prism/plot"
)

// DMRIResult summarises the dMRI part of the demo.
type DMRIResult struct {
	Model    string              `json:"model"`
	Settings dmrifit.FitSettings `json:"settings"`
	Grid     [3]int              `json:"grid"`
	Volumes  int                 `json:"volumes"`
	Slab     [2]int              `json:"slab"` // fitted slices [z0, z1)
	Slice    int                 `json:"slice"`
	InMask   int                 `json:"voxels_in_mask"`
	Fitted   int                 `json:"voxels_fitted"`
	Timings  map[string]float64  `json:"timings_s"`
	// VoxelsPerSecond is the fit's throughput (wall clock).
	VoxelsPerSecond float64 `json:"voxels_per_second"`
	// NFibres is the fraction of fitted voxels whose most probable number
	// of fibres is 0, 1, 2, … (from nfibres_prob).
	NFibres []float64 `json:"map_nfibres_fraction"`
	// MeanModelMass is the mean over voxels of the model-list mass of
	// q(M | x, λ) before renormalisation.
	MeanModelMass float64 `json:"mean_model_mass"`
	// Figures are the report's dMRI figures (paths relative to Out).
	Figures []Figure `json:"figures"`
}

// Figure is one figure of the report.
type Figure struct {
	Path    string `json:"path"`
	Title   string `json:"title"`
	Caption string `json:"caption"`
	// Wide figures take the whole width of the report.
	Wide bool `json:"wide,omitempty"`
}

// slab returns the fitted slices [z0, z1) of a scan with nz slices:
// n slices centred on the middle slice, or all with n = 0.
func slab(nz, n int) (z0, z1 int) {
	if n <= 0 || n >= nz {
		return 0, nz
	}
	z0 = nz/2 - n/2
	return z0, z0 + n
}

// restrictToSlab keeps the voxels of slices [z0, z1) of s, in the fit
// (Voxels, Signal) and in the mask written with the outputs.
func restrictToSlab(s *dmrifit.Scan, z0, z1 int) {
	plane := s.Nx * s.Ny
	n := s.Design.N
	var vox []int
	var sig []float64
	for v, i := range s.Voxels {
		if z := i / plane; z >= z0 && z < z1 {
			vox = append(vox, i)
			sig = append(sig, s.Signal[v*n:(v+1)*n]...)
		}
	}
	s.Voxels, s.Signal = vox, sig
	for i := range s.Mask {
		if z := i / plane; z < z0 || z >= z1 {
			s.Mask[i] = false
		}
	}
}

// runDMRI fits the shipped b3s network to the bundled scan and draws the
// dMRI figures.
func runDMRI(ctx context.Context, c Config, logf func(string, ...any)) (*DMRIResult, error) {
	in := filepath.Join(c.Out, dataDir)
	files := dmrifit.ScanFiles{DWI: filepath.Join(in, data.ScanDWI), Bval: filepath.Join(in, data.ScanBval),
		Bvec: filepath.Join(in, data.ScanBvec), Mask: filepath.Join(in, data.ScanMask)}
	r := &DMRIResult{Model: DMRIModel, Settings: c.Fit, Timings: map[string]float64{}}
	start := time.Now()
	t := start
	scan, err := dmrifit.LoadScan(files)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	r.Grid, r.Volumes, r.InMask = [3]int{scan.Nx, scan.Ny, scan.Nz}, scan.Design.N, scan.MaskCount()
	z0, z1 := slab(scan.Nz, c.Slices)
	restrictToSlab(scan, z0, z1)
	r.Slab, r.Slice, r.Fitted = [2]int{z0, z1}, (z0+z1)/2, len(scan.Voxels)
	if r.Fitted == 0 {
		return nil, fmt.Errorf("demo: no mask voxel in slices %d–%d", z0, z1-1)
	}
	r.Timings["load"] = time.Since(t).Seconds()

	t = time.Now()
	post, err := models.Open(DMRIModel)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	r.Timings["model"] = time.Since(t).Seconds()
	logf("dMRI: fitting %d voxels (slices %d–%d of %d, %d in the whole mask) with the shipped %s network: %d samples × %d %s steps per voxel",
		r.Fitted, z0, z1-1, scan.Nz, r.InMask, DMRIModel, c.Fit.Samples, c.Fit.Steps, c.Fit.Solver)

	// The same run as `prism dmri fit`; the demo holds the lock of its
	// whole folder and replaces an earlier demo's maps.
	out := filepath.Join(c.Out, dmriDir)
	cfg := dmrifit.RunConfig{Tool: "prism demo", Out: out, Unlocked: true, Fresh: true, Model: DMRIModel, Started: start,
		Timings: map[string]float64{"load": r.Timings["load"], "checkpoint": r.Timings["model"]}}
	if c.FitProgress != nil {
		cfg.Progress = progress.Func(c.FitProgress)
	}
	sum, err := dmrifit.Run(ctx, scan, post, c.Fit, cfg)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	r.Timings["fit"], r.Timings["write"] = sum.Info.Timings["fit"], sum.Info.Timings["write"]
	r.VoxelsPerSecond, r.MeanModelMass = sum.Info.VoxelsPerSecond, sum.MeanModelMass
	logf("dMRI: %d voxels in %.0f s (%.1f voxels/s); maps in %s", r.Fitted, r.Timings["fit"], r.VoxelsPerSecond, out)

	if err := r.figures(c.Out, scan); err != nil {
		return nil, err
	}
	return r, nil
}

// sliceOf returns volume t of slice z of vol, NaN outside mask.
func sliceOf(vol *nifti.Volume, mask []bool, z, t int) []float64 {
	nx, ny, nz, _ := vol.Shape()
	plane, nv := nx*ny, nx*ny*nz
	g := make([]float64, plane)
	for i := range g {
		if !mask[z*plane+i] {
			g[i] = math.NaN()
			continue
		}
		g[i] = float64(vol.Data[t*nv+z*plane+i])
	}
	return g
}

// figures draws the dMRI figures of the report from the written maps, and
// the fibre-count summary.
func (r *DMRIResult) figures(out string, scan *dmrifit.Scan) error {
	read := func(name string) (*nifti.Volume, error) {
		v, err := nifti.Read(filepath.Join(out, dmriDir, name+dmrifit.OutputExt))
		if err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		return v, nil
	}
	nf, err := read("nfibres_prob")
	if err != nil {
		return err
	}
	dy, err := read("dyads1")
	if err != nil {
		return err
	}
	f1, err := read("mean_f1samples")
	if err != nil {
		return err
	}
	nx, ny, nz, nk := nf.Shape()
	plane, nv := nx*ny, nx*ny*nz

	// MAP fibre count over all fitted voxels.
	r.NFibres = make([]float64, nk)
	for _, i := range scan.Voxels {
		best := 0
		for k := 1; k < nk; k++ {
			if nf.Data[k*nv+i] > nf.Data[best*nv+i] {
				best = k
			}
		}
		r.NFibres[best] += 1 / float64(len(scan.Voxels))
	}

	z := r.Slice
	expected := make([]float64, plane)
	crossing := make([]float64, plane)
	for i := range plane {
		if !scan.Mask[z*plane+i] {
			expected[i], crossing[i] = math.NaN(), math.NaN()
			continue
		}
		for k := range nk {
			p := float64(nf.Data[k*nv+z*plane+i])
			expected[i] += float64(k) * p
			if k >= 2 {
				crossing[i] += p
			}
		}
	}
	b0 := make([]float64, plane)
	for i := range b0 {
		b0[i] = float64(scan.B0[z*plane+i])
	}
	dirs := plot.Directions{NX: nx, NY: ny, V: make([]float64, 3*plane), Scale: sliceOf(f1, scan.Mask, z, 0)}
	for i := range plane {
		for c := range 3 {
			if scan.Mask[z*plane+i] {
				dirs.V[3*i+c] = float64(dy.Data[c*nv+z*plane+i])
			} else {
				dirs.V[3*i+c] = math.NaN()
			}
		}
	}
	// Full brightness at the 99th percentile of f1 in the slice, so that
	// the map is not dark where f1 is moderate (DirectionMap clamps at 1).
	f1Full := percentile(dirs.Scale, 0.99)
	if !(f1Full > 0) {
		f1Full = 1
	}
	for i, s := range dirs.Scale {
		dirs.Scale[i] = s / f1Full
	}

	slice := fmt.Sprintf("axial slice z = %d of %d", z, nz)
	figs := []struct {
		Figure
		draw func(path string) error
	}{
		{Figure{Path: "figures/b0.png", Title: "b = 0 image", Caption: "The mean b = 0 signal of the bundled scan, " + slice + " (whole slice, for orientation)."},
			func(p string) error {
				return plot.SliceMap(p, plot.Grid{NX: nx, NY: ny, Data: b0}, plot.SliceOptions{ColorMap: plot.Grey,
					Label: "b0 signal", Options: plot.Options{Title: "b = 0, " + slice}})
			}},
		{Figure{Path: "figures/nfibres-expected.png", Title: "Expected number of fibres",
			Caption: "Σ k · P(k fibres | x), from nfibres_prob (the model posterior q(M | x, λ) summed over models with k sticks), " + slice + "; white: outside the brain mask."},
			func(p string) error {
				return plot.SliceMap(p, plot.Grid{NX: nx, NY: ny, Data: expected}, plot.SliceOptions{Min: 0, Max: float64(nk - 1),
					Label: "E[number of fibres]", Options: plot.Options{Title: "expected number of fibres, " + slice}})
			}},
		{Figure{Path: "figures/nfibres-crossing.png", Title: "Probability of crossing fibres",
			Caption: "P(≥ 2 fibres | x), the sum of volumes 2 and 3 of nfibres_prob, " + slice + "."},
			func(p string) error {
				return plot.SliceMap(p, plot.Grid{NX: nx, NY: ny, Data: crossing}, plot.SliceOptions{Min: 0, Max: 1,
					Label: "P(≥ 2 fibres)", Options: plot.Options{Title: "P(crossing fibres), " + slice}})
			}},
		{Figure{Path: "figures/dyads1-dec.png", Title: "Principal fibre direction (colour-coded)",
			Caption: fmt.Sprintf("The mean direction of the strongest stick (dyads1) as RGB = (|x|, |y|, |z|) along the image axes (for this axial scan red ≈ left–right, green ≈ front–back, blue ≈ foot–head), brightness its mean fraction f1 / %.2f (the 99th percentile of f1 in the slice), %s.", f1Full, slice)},
			func(p string) error {
				return plot.DirectionMap(p, dirs, plot.Options{Title: "dyads1 × f1, " + slice})
			}},
	}
	for _, f := range figs {
		if err := f.draw(filepath.Join(out, filepath.FromSlash(f.Path))); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		r.Figures = append(r.Figures, f.Figure)
	}
	return nil
}

// percentile returns the q-quantile (nearest rank) of the finite values of
// v, NaN if there is none.
func percentile(v []float64, q float64) float64 {
	var f []float64
	for _, x := range v {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			f = append(f, x)
		}
	}
	if len(f) == 0 {
		return math.NaN()
	}
	slices.Sort(f)
	return f[min(len(f)-1, int(q*float64(len(f))))]
}

// scanSlices returns the number of axial slices of the bundled scan, read
// from its mask's header.
func scanSlices() (int, error) {
	b, err := data.Files.ReadFile(data.ScanMask)
	if err != nil {
		return 0, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", data.ScanMask, err)
	}
	hdr := make([]byte, 540) // a NIfTI-2 header; NIfTI-1 needs 348
	n, err := io.ReadFull(zr, hdr)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return 0, fmt.Errorf("%s: %w", data.ScanMask, err)
	}
	h, err := nifti.ParseHeader(hdr[:n])
	if err != nil {
		return 0, fmt.Errorf("%s: %w", data.ScanMask, err)
	}
	return int(h.Dim[3]), nil
}
