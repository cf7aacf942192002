package dmrifit

import (
	"github.com/prismsbi/prism/engine/kernels"
)

// RunInfo is the run.json record of a pipeline run.
type RunInfo struct {
	Tool       string    `json:"tool"`
	Version    string    `json:"version"`
	GoVersion  string    `json:"go_version"`
	Kernels    string    `json:"kernels"` // the engine's kernel path (avx512, avx2, generic, go)
	Started    string    `json:"started"`
	Inputs     ScanFiles `json:"inputs"`
	MaskSource string    `json:"mask_source"`
	Grid       [3]int    `json:"grid"`
	Volumes    int       `json:"volumes"`
	B0Volumes  int       `json:"b0_volumes"`
	// Voxels in the mask, fitted, and skipped by reason.
	VoxelsInMask  int            `json:"voxels_in_mask"`
	VoxelsFitted  int            `json:"voxels_fitted"`
	VoxelsSkipped map[string]int `json:"voxels_skipped"`
	Settings      any            `json:"settings"`
	Workers       int            `json:"workers"`
	// Timings in seconds: load, fit, write, total.
	Timings         map[string]float64 `json:"timings_s"`
	VoxelsPerSecond float64            `json:"voxels_per_second"`
}

// NewRunInfo fills the scan-dependent fields of a RunInfo.
func NewRunInfo(tool string, s *Scan) *RunInfo {
	return &RunInfo{
		Tool: tool, Kernels: kernels.Path(), Inputs: s.Files, MaskSource: s.MaskSource,
		Grid: [3]int{s.Nx, s.Ny, s.Nz}, Volumes: s.Design.N, B0Volumes: s.B0Volumes,
		VoxelsInMask: s.MaskCount(), VoxelsFitted: len(s.Voxels), VoxelsSkipped: s.Skipped,
		Timings: map[string]float64{},
	}
}
