// Package dmri is prism's diffusion-MRI voxel pipeline: it loads a scan (a
// 4-D NIfTI image with its FSL bval/bvec gradient table and an optional
// brain mask), preprocesses it as the PRISM reference code does
// (reference-spec §2.7), writes per-voxel posterior samples of
// ball-and-sticks parameters in the file layout of FSL's BedpostX, and
// compares two such output folders.
//
// It is shared by `prism dmri mcmc` (the reference sampler of package mcmc)
// and `prism dmri fit` (the amortized posterior), so that the two write
// directly comparable folders.
//
//   - LoadScan reads the image, the table (family/dmri.ReadFSL) and the
//     mask (or builds one with AutoMask), computes b0 as the mean of the
//     b ≤ 50 s/mm² volumes and divides every volume by it. Voxels with
//     b0 ≤ 0 or any non-finite value are skipped and counted by reason.
//     b-values are not rounded and volumes are not reordered (see
//     docs/families/dmri.md).
//   - Posterior holds samples per voxel (f, θ, φ per stick; d, d_std, S0);
//     WriteBedpostX writes merged_*/mean_* samples, dyads, dispersions and
//     nodif_brain_mask with the input's geometry.
//   - Compare reads two output folders and summarises the agreement of
//     dyads, fractions and fibre counts (JSON and PNG slice maps).
//
// Vector convention: directions are expressed in the frame of the input
// b-vectors. FSL b-vectors are in FSL's voxel convention (x negated with
// respect to the voxel axes when the image's sform/qform determinant is
// positive, nifti.Header.FSLFlipX), and the model only depends on the
// angles between gradients and sticks, so the sampled directions, θ/φ and
// dyads come out in FSL's convention, which is what BedpostX writes and
// probtrackx reads. No flip is applied on output. docs/mcmc.md has the
// details.
package dmri
