package family

// ExactPosterior is implemented by families whose evidence and parameter
// posterior are known in closed form on their fixed design (lingauss-k6).
// Evaluation compares a trained network with these exact answers (total
// variation of the model posterior, θ coverage, evidence), and the
// correction package tests itself against them; nothing outside the
// family needs to know which family it is.
type ExactPosterior interface {
	// LogEvidence returns log p(x | M) = log ∫ p(x | θ, M) p(θ | M) dθ for
	// an observation x on the family's fixed design.
	LogEvidence(x []float64, mask []bool) float64
	// ParamPosterior returns p(θ | x, M) when it is Gaussian in the latent
	// θ: its mean (length DMax) and covariance (DMax × DMax); the entries of
	// dimensions inactive under mask are zero.
	ParamPosterior(x []float64, mask []bool) (mean []float64, cov [][]float64)
}
