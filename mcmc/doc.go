// Package mcmc is prism's reference Markov chain Monte Carlo sampler for the
// multi-shell ball-and-N-sticks model of diffusion MRI, written after the
// published description of FSL's BedpostX (Behrens et al. 2003, 2007;
// Jbabdi et al. 2012), together with convergence diagnostics (split R̂).
//
// The model is BedpostX's "model 2": the normalised signal of measurement j
// with b-value b_j and unit gradient g_j is
//
//	μ_j = S0 · [ (1 − Σ_i f_i)·G(b_j, 1) + Σ_i f_i·G(b_j, (g_j·n_i)²) ],
//	G(b, c) = (1 + b c d_std²/d)^−(d/d_std)²,
//
// the mono-exponential exp(−b c D) averaged over a Gamma-distributed
// diffusivity with mean d and standard deviation d_std (the same signal as
// the b3s family of family/dmri; tested against it), with
// stick directions n_i = (sin θ_i cos φ_i, sin θ_i sin φ_i, cos θ_i).
//
// Sampler (per voxel, Metropolis-within-Gibbs, one "jump" = one sweep over
// every parameter in turn, each with its own Gaussian random-walk proposal):
//
//   - Noise: Gaussian with unknown σ marginalised under the Jeffreys prior
//     p(σ) ∝ 1/σ, as BedpostX does (Behrens et al. 2003), so the likelihood
//     is p(y | θ) ∝ SSR(θ)^(−n/2) with SSR the residual sum of squares.
//   - Priors: S0 > 0 flat; d ∈ (0, DMax] and d_std ∈ (0, DStdMax] flat (the
//     supports of the b3s prior, so that the two posteriors are comparable);
//     directions uniform on the sphere, p(θ, φ) ∝ |sin θ|; f_i ≥ 0 with
//     Σ f_i ≤ 1; f_1 flat; f_2..f_N carry the automatic-relevance-
//     determination prior p(f) ∝ f^−w (Behrens et al. 2007, w = ARDWeight,
//     1 by default), which drives unsupported sticks to zero.
//   - Proposals: per-parameter widths adapted every UpdateProposalEvery
//     jumps by the factor √((accepted+1)/(rejected+1)), which settles at
//     about 50 % acceptance. Adaptation runs during burn-in only and is then
//     frozen, so the recorded part is a time-homogeneous Markov chain with
//     the posterior as its stationary law (BedpostX keeps adapting).
//   - Initialisation: a linear least-squares tensor fit to the log signal:
//     stick 1 along the principal eigenvector with d = λ1 and
//     f_1 = 1 − (λ2+λ3)/(2λ1) (what a ball plus one stick gives), sticks
//     2 and 3 along the second and third eigenvectors with f = 0.05.
//   - Output: sticks are relabelled per voxel by decreasing posterior mean
//     fraction (BedpostX's ordering); directions are reported on the upper
//     hemisphere (n_z ≥ 0), θ ∈ [0, π/2], φ ∈ (−π, π].
//
// Defaults are BedpostX's: 1000 burn-in jumps, 1250 recorded jumps, a sample
// every 25 jumps (50 samples), 3 sticks, ARD weight 1, proposal update every
// 40 jumps. Every voxel has its own PCG stream (Settings.Seed, voxel index),
// so results do not depend on the number of workers.
//
// docs/mcmc.md describes the choices and the validation.
package mcmc
