// Package dmrifit fits a trained posterior to every voxel of a diffusion
// MRI scan and writes BedpostX-style and prism maps. (The models
// themselves, ball-and-sticks and the others, are the families of package
// family/dmri.) It loads a scan (a
// 4-D NIfTI image with its FSL bval/bvec gradient table and an optional
// brain mask), preprocesses it as the PRISM reference code does,
// writes per-voxel posterior samples of
// ball-and-sticks parameters in the file layout of FSL's BedpostX, and
// compares two such output folders.
//
// It is shared by `prism dmri mcmc` (the reference sampler of package mcmc)
// and `prism dmri fit` (the amortized posterior), so that the two write
// directly comparable folders.
//
//   - LoadScan reads the image, the table (gradtable.ReadFSL) and the
//     mask (or builds one with AutoMask), computes b0 as the mean of the
//     b ≤ 50 s/mm² volumes and divides every volume by it. Voxels with
//     b0 ≤ 0 or any non-finite value are skipped and counted by reason.
//     b-values are not rounded and volumes are not reordered (see
//     docs/families/dmri.md).
//   - StickSamples holds samples per voxel (f, θ, φ per stick; d, d_std, S0);
//     WriteBedpostX writes merged_*/mean_* samples, dyads, dispersions and
//     nodif_brain_mask with the input's geometry.
//   - Fitter (`prism dmri fit`, docs/dmri.md) fits a trained PRISM network
//     of a multi-shell ball-and-sticks family (b3s) to the scan in
//     batches: the exact model posterior over the family's model list,
//     joint samples (model, then parameters; by default from the most
//     probable stick count) with their sticks aligned across samples
//     (relabel.go), ESS and posterior-predictive RMSE; FitState keeps finished batches in a crash-safe file so that
//     an interrupted run continues; WriteFit adds model_prob,
//     nfibres_prob, map_model, ess, pp_rmse and MRtrix-style peaks to the
//     BedpostX layout.
//   - SelectFitter (`prism dmri fit` with bszt, bszt-conv or any other
//     dMRI family that is not ball-and-sticks) writes model-selection maps:
//     presence probabilities per component and component class, the MAP
//     model, the model-averaged predicted signal, and the BedpostX layout
//     of the family's plain sticks (select.go).
//   - TensorLOO and NetworkLOO cross-validate signal prediction by leaving
//     out one diffusion-weighted volume at a time (`prism dmri loocv`,
//     loocv.go); SelectionPhantom classifies known-compartment voxels
//     (`prism dmri select-phantom`, phantom.go).
//   - NewCrossingPhantom and EvaluateCrossing are the synthetic
//     crossing-fibre phantom of `prism dmri crossing` (issue 20).
//   - Shard splits a fit into N deterministic parts for separate
//     processes (Fitter.FitShard, --shard I/N or from a SLURM array or
//     Kubernetes Indexed Job); MergeShards joins the finished parts into
//     the whole-scan FitState, from which WriteFit writes exactly the
//     unsharded fit's files (docs/cohorts.md).
//   - Run is the whole `prism dmri fit` (and `prism demo`) workflow over a
//     loaded scan and network: folder lock, resumable state keyed by the
//     settings and the weights and data hashes, timings, run.json, shards;
//     RunDTI, RunLOOCV, RunSampler (`prism dmri mcmc`) and RunCrossing
//     are those of the other commands, which only parse flags
//     (cmd/prism) and draw progress with internal/progress.
//   - Compare reads two output folders and summarises the agreement of
//     dyads, fractions and fibre counts (JSON and PNG slice maps).
//
// Vector convention: directions are expressed in the frame of the input
// b-vectors. FSL b-vectors are in FSL's voxel convention (x negated with
// respect to the voxel axes when the image's sform/qform determinant is
// positive, nifti.Header.FSLFlipX), and the model only depends on the
// angles between gradients and sticks, so the sampled directions, θ/φ and
// dyads come out in FSL's convention, which is what BedpostX writes and
// probtrackx reads. No flip is applied on output, except for the
// MRtrix-style peaks, which are mapped to world coordinates
// (PeakDirection). docs/dmri.md has the details.
package dmrifit
