package family

// Observation kinds: what the measurements of one observation are. The
// kind, not the family, decides how a network reads observations (package
// network has one input embedding per kind).
const (
	// ObservationGrid: N values at fixed positions of one covariate (the
	// grid), always in the same order (symbolic regression, lingauss,
	// spec families with a fixed grid).
	ObservationGrid = "grid"
	// ObservationDiffusion: one diffusion MRI signal per measurement with
	// covariates (b [s/mm²], gx, gy, gz), in any order and number.
	ObservationDiffusion = "diffusion"
)

// ObservationKinder is implemented by families that state the kind of
// their observations.
type ObservationKinder interface {
	ObservationKind() string
}

// ObservationKindOf returns f's observation kind: the one it states, or
// ObservationGrid for a family that does not (a fixed grid is what a
// family without per-observation designs has).
func ObservationKindOf(f Family) string {
	if k, ok := f.(ObservationKinder); ok {
		return k.ObservationKind()
	}
	return ObservationGrid
}

// ObservationPoints: one value per measurement at a value of one covariate
// (e.g. a sampling time) of the observation's own; observations differ in
// where and how often they were measured (spec families with
// observation.covariate).
const ObservationPoints = "points"

// CovariateRanger is implemented by families with ObservationPoints
// observations: the range of covariate values the network should expect,
// which scales its input.
type CovariateRanger interface {
	CovariateRange() (lo, hi float64)
}
