#!/usr/bin/python3
"""Helper of bench/crossing_vs_csd.sh (issue 20): DIPY CSD peaks, and the
comparison table of prism's fits with MRtrix3 and DIPY CSD.

Uses numpy, nibabel and dipy only (Debian: python3-dipy, python3-nibabel).
Every direction is compared in world (scanner) coordinates, as MRtrix3
stores peaks: FSL-convention vectors (b-vectors, BedpostX dyads) are mapped
with x negated when the image's affine has a non-negative determinant
(FSL's radiological convention), then rotated by the affine's rotation.

  crossing_compare.py dipy DWI BVAL BVEC MASK OUT.nii.gz
      DIPY CSD (single-shell at the highest b-value plus the b0s, response
      from auto_response_ssst), peaks at DIPY's defaults except a relative
      peak threshold of 0.25; writes peaks in world coordinates scaled by
      their amplitude relative to the voxel's first peak (MRtrix layout,
      3 volumes per peak, NaN where none).
  crossing_compare.py table --mask MASK --fa FA --mrtrix PEAKS --dipy PEAKS
      --fit DIR --mcmc DIR [--json OUT]
      prints the issue's table (markdown) and writes the numbers as JSON.
"""
import argparse
import json
import math
import sys

import nibabel as nib
import numpy as np

# A CSD peak counts as a fibre when its amplitude is at least REL_PEAK of
# the voxel's first peak; a stick when its mean fraction exceeds F_MIN
# (BedpostX's convention). Two CSD methods "agree on a crossing" when both
# see two fibres and their directions match within AGREE_DEG after the
# best assignment.
REL_PEAK = 0.25
F_MIN = 0.05
AGREE_DEG = 15.0
FA_MIN = 0.5


def fsl_to_world(vecs, affine):
    """Maps (..., 3) FSL-convention vectors to unit world vectors."""
    rot = affine[:3, :3] / np.linalg.norm(affine[:3, :3], axis=0)
    v = np.array(vecs, dtype=float)
    if np.linalg.det(affine[:3, :3]) >= 0:
        v[..., 0] = -v[..., 0]
    w = v @ rot.T
    n = np.linalg.norm(w, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return w / n


def angle(a, b):
    """Angle in degrees between the axes a and b (..., 3); NaN if either is zero/NaN."""
    with np.errstate(invalid="ignore", divide="ignore"):
        c = np.abs(np.sum(a * b, axis=-1)) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
    return np.degrees(np.arccos(np.clip(c, 0, 1)))


def cmd_dipy(args):
    from dipy.core.gradients import gradient_table
    from dipy.data import default_sphere
    from dipy.direction import peaks_from_model
    from dipy.reconst.csdeconv import ConstrainedSphericalDeconvModel, auto_response_ssst

    img = nib.load(args.dwi)
    data = np.asarray(img.dataobj, dtype=np.float64)
    bvals = np.loadtxt(args.bval).ravel()
    bvecs = np.loadtxt(args.bvec)
    if bvecs.shape[0] == 3:
        bvecs = bvecs.T
    mask = np.asarray(nib.load(args.mask).dataobj) > 0 if args.mask != "-" else None
    b0 = bvals <= 50
    top = bvals.max()
    shell = np.abs(bvals - top) <= 0.1 * top
    keep = b0 | shell
    gtab = gradient_table(bvals[keep], bvecs[keep], b0_threshold=50)
    data = data[..., keep]
    response, _ = auto_response_ssst(gtab, data, roi_radii=10, fa_thr=0.7)
    model = ConstrainedSphericalDeconvModel(gtab, response, sh_order=8)
    peaks = peaks_from_model(model, data, default_sphere, relative_peak_threshold=REL_PEAK,
                             min_separation_angle=25, mask=mask, npeaks=3, return_sh=False)
    dirs = fsl_to_world(peaks.peak_dirs, img.affine)  # DIPY's peaks are in the b-vectors' frame
    vals = peaks.peak_values
    rel = np.where(vals[..., :1] > 0, vals / np.where(vals[..., :1] > 0, vals[..., :1], 1), 0)
    out = np.full(data.shape[:3] + (9,), np.nan, dtype=np.float32)
    for k in range(3):
        present = rel[..., k] > 0
        out[..., 3 * k:3 * k + 3][present] = dirs[..., k, :][present] * rel[..., k][present][:, None]
    nib.save(nib.Nifti1Image(out, img.affine, img.header), args.out)


def load_peaks(path):
    """Peaks (x, y, z, 3, 3) as unit directions and amplitudes relative to peak 1."""
    p = np.asarray(nib.load(path).dataobj, dtype=float)
    p = p.reshape(p.shape[:3] + (p.shape[3] // 3, 3))[..., :3, :]
    amp = np.nan_to_num(np.linalg.norm(p, axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        d = p / amp[..., None]
        rel = np.where(amp[..., :1] > 0, amp / amp[..., :1], 0)
    return d, rel


def load_bedpostx(folder):
    """World-coordinate dyads (x, y, z, 3, 3), mean fractions and dispersions of a BedpostX folder."""
    dy, f, disp = [], [], []
    aff = None
    for i in (1, 2, 3):
        try:
            img = nib.load(f"{folder}/dyads{i}.nii.gz")
        except FileNotFoundError:
            break
        aff = img.affine
        dy.append(np.asarray(img.dataobj, dtype=float))
        f.append(np.asarray(nib.load(f"{folder}/mean_f{i}samples.nii.gz").dataobj, dtype=float))
        disp.append(np.asarray(nib.load(f"{folder}/dyads{i}_dispersion.nii.gz").dataobj, dtype=float))
    dy = fsl_to_world(np.stack(dy, axis=3), aff)
    return dy, np.stack(f, axis=3), np.stack(disp, axis=3)


def matched_second(d1, d2, p1, p2):
    """Angle of the second direction to peak 2 under the better of the two assignments."""
    same = angle(d1, p1) + angle(d2, p2)
    swap = angle(d1, p2) + angle(d2, p1)
    return np.where(same <= swap, angle(d2, p2), angle(d1, p2))


def med(x):
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return (float(np.median(x)) if x.size else float("nan")), int(x.size)


def cmd_table(args):
    mask = np.asarray(nib.load(args.mask).dataobj) > 0
    fa = np.asarray(nib.load(args.fa).dataobj, dtype=float)
    mr, mr_rel = load_peaks(args.mrtrix)
    dp, dp_rel = load_peaks(args.dipy)
    mr2 = mask & (mr_rel[..., 1] >= REL_PEAK)
    dp2 = mask & (dp_rel[..., 1] >= REL_PEAK)
    wm = mask & (fa > FA_MIN)
    csd_same = np.maximum(angle(mr[..., 0, :], dp[..., 0, :]), angle(mr[..., 1, :], dp[..., 1, :]))
    csd_swap = np.maximum(angle(mr[..., 0, :], dp[..., 1, :]), angle(mr[..., 1, :], dp[..., 0, :]))
    agree = mr2 & dp2 & (np.minimum(csd_same, csd_swap) <= AGREE_DEG)
    res = {"voxels": int(mask.sum()), "fa_gt_0.5": int(wm.sum()), "csd_agree_crossings": int(agree.sum()),
           "rel_peak": REL_PEAK, "f_min": F_MIN, "agree_deg": AGREE_DEG}
    rows = {}
    for name, folder in (("fit", args.fit), ("mcmc", args.mcmc)):
        dy, f, disp = load_bedpostx(folder)
        two = mask & (f[..., 1] > F_MIN)
        both = two & mr2
        r = {}
        r["dyads1_vs_mrtrix_peak1_fa"] = med(angle(dy[..., 0, :], mr[..., 0, :])[wm & (f[..., 0] > F_MIN)])
        r["dyads2_vs_mrtrix_peak2_both"] = med(angle(dy[..., 1, :], mr[..., 1, :])[both])
        r["dyads2_vs_mrtrix_peak2_both_matched"] = med(matched_second(dy[..., 0, :], dy[..., 1, :], mr[..., 0, :], mr[..., 1, :])[both])
        r["dyads2_vs_csd_peak2_agree_matched"] = med(matched_second(dy[..., 0, :], dy[..., 1, :], mr[..., 0, :], mr[..., 1, :])[agree & two])
        r["second_stick_in_agree"] = [int((agree & two).sum()), int(agree.sum())]
        r["within_angle_two"] = med(angle(dy[..., 0, :], dy[..., 1, :])[two])
        r["dispersion2_two"] = med(disp[..., 1][two])
        r["two_fibre_share_fa"] = float((two & wm).sum() / max(wm.sum(), 1))
        rows[name] = r
        res[name] = r
    res["mrtrix_vs_dipy"] = {
        "peak1_fa": med(angle(mr[..., 0, :], dp[..., 0, :])[wm]),
        "peak2_both_matched": med(matched_second(mr[..., 0, :], mr[..., 1, :], dp[..., 0, :], dp[..., 1, :])[mr2 & dp2]),
        "within_angle_mrtrix": med(angle(mr[..., 0, :], mr[..., 1, :])[mr2]),
        "within_angle_dipy": med(angle(dp[..., 0, :], dp[..., 1, :])[dp2]),
        "two_fibre_share_fa_mrtrix": float((mr2 & wm).sum() / max(wm.sum(), 1)),
        "two_fibre_share_fa_dipy": float((dp2 & wm).sum() / max(wm.sum(), 1)),
    }
    c = res["mrtrix_vs_dipy"]
    fmt = lambda m: f"{m[0]:.1f}° (n = {m[1]})"
    print(f"| slab, median angle | prism fit | prism `dmri mcmc` | MRtrix CSD vs DIPY CSD |")
    print("|---|---|---|---|")
    print(f"| dyads1 vs MRtrix peak 1, FA > {FA_MIN} | {fmt(rows['fit']['dyads1_vs_mrtrix_peak1_fa'])} | {fmt(rows['mcmc']['dyads1_vs_mrtrix_peak1_fa'])} | {fmt(c['peak1_fa'])} |")
    print(f"| dyads2 vs MRtrix peak 2, where both see two fibres (as labelled / best matching) | {fmt(rows['fit']['dyads2_vs_mrtrix_peak2_both'])} / {rows['fit']['dyads2_vs_mrtrix_peak2_both_matched'][0]:.1f}° | {fmt(rows['mcmc']['dyads2_vs_mrtrix_peak2_both'])} / {rows['mcmc']['dyads2_vs_mrtrix_peak2_both_matched'][0]:.1f}° | {fmt(c['peak2_both_matched'])} (matched) |")
    print(f"| dyads2 vs CSD peak 2 where MRtrix and DIPY agree on a crossing (best matching) | {fmt(rows['fit']['dyads2_vs_csd_peak2_agree_matched'])} | {fmt(rows['mcmc']['dyads2_vs_csd_peak2_agree_matched'])} | {res['csd_agree_crossings']} crossings |")
    print(f"| angle between the voxel's own two directions | {fmt(rows['fit']['within_angle_two'])} | {fmt(rows['mcmc']['within_angle_two'])} | {fmt(c['within_angle_mrtrix'])} MRtrix, {fmt(c['within_angle_dipy'])} DIPY |")
    print(f"| `dyads2_dispersion` where a second stick | {rows['fit']['dispersion2_two'][0]:.3f} | {rows['mcmc']['dispersion2_two'][0]:.3f} | – |")
    print(f"| share of FA > {FA_MIN} voxels with two fibres | {rows['fit']['two_fibre_share_fa']:.2f} | {rows['mcmc']['two_fibre_share_fa']:.2f} | {c['two_fibre_share_fa_mrtrix']:.2f} MRtrix, {c['two_fibre_share_fa_dipy']:.2f} DIPY |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dipy")
    for a in ("dwi", "bval", "bvec", "mask", "out"):
        d.add_argument(a)
    t = sub.add_parser("table")
    for a in ("--mask", "--fa", "--mrtrix", "--dipy", "--fit", "--mcmc"):
        t.add_argument(a, required=True)
    t.add_argument("--json")
    args = ap.parse_args()
    {"dipy": cmd_dipy, "table": cmd_table}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
