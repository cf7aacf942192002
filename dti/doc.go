// Package dti fits the diffusion tensor to diffusion-MRI voxels by linear
// least squares on the log signal: a fast, model-light baseline and sanity
// check for prism's dMRI pipeline (`prism dmri dti`, docs/dmri.md).
//
// The model is
//
//	ln S_j = ln S0 − b_j g_jᵀ D g_j
//
// with D a symmetric 3×3 tensor (six unknowns) and S0 the non-weighted
// signal. A Fitter is prepared once per gradient table (NewFitter checks
// that the table determines the seven unknowns and computes the ordinary
// least-squares pseudo-inverse of the design) and fits voxels with
//
//  1. ordinary least squares (OLS) on ln S_j, using only measurements
//     with S_j > 0 (the precomputed pseudo-inverse when all are positive,
//     the normal equations of the remaining rows otherwise), then
//  2. weighted least-squares (WLS) iterations, one by default
//     (DefaultWLSIterations), each with weights Ŝ_j², Ŝ_j the signal
//     predicted by the previous fit: var(ln S_j) ≈ σ²/S_j² for Gaussian
//     or high-SNR Rician noise, so these are the inverse-variance
//     weights. One iteration after OLS is dipy's "WLS" tensor fit; FSL's
//     `dtifit --wls` also weights by the squared signal. MRtrix's
//     `dwi2tensor` (3.0.3) starts from a WLS fit weighted by the measured
//     S_j² and then reweights twice with Ŝ_j²; `dwi2tensor -ols -iter k`
//     matches NewFitter(d, k) for k = 0 and 2 to float32 precision
//     (docs/dmri.md, "DTI baseline").
//
// The tensor is eigen-decomposed with a cyclic Jacobi method (Eigen),
// exact to rounding also for repeated eigenvalues, giving L1 ≥ L2 ≥ L3
// and orthonormal V1, V2, V3, from which FA, MD and the mode MO follow.
// Eigenvalues and MD are reported as fitted (a noisy fit can have a
// negative eigenvalue, as with FSL); FA and MO are computed from the
// eigenvalues clipped at zero, i.e. of the nearest positive semi-definite
// tensor in the Frobenius norm, so that FA ∈ [0, 1].
//
// Directions are in the frame of the gradient directions given: with an
// FSL b-vector table, FSL's voxel convention, the convention of dtifit's
// V1 and of the dyads of `prism dmri fit` (package dmri). Vectors are
// signed with z ≥ 0 (then y ≥ 0, then x ≥ 0), as the dyads are.
//
// FitVoxel allocates nothing; FitVoxels spreads voxels over goroutines.
package dti
