#!/usr/bin/python3
"""Leave-one-volume-out cross-validation of DIPY's models on the volumes and
voxels of a `prism dmri loocv` run (issue 25; not part of CI).

Reads the held-out volumes from DIR/loocv.json and prism's white-matter mask
DIR/wm_mask.nii.gz, fits DIPY models to the scan without each held-out
volume and predicts it, on the b0-normalised signal exactly as prism does
(every volume divided by the voxel's mean of the b <= 50 s/mm^2 volumes, which
are never held out). Prints and writes (--json) the median and mean per-voxel
RMSE over all voxels prism fitted and over its white-matter voxels, next to
prism's own numbers from loocv.json.

Methods (--methods, comma-separated):
  dti    DIPY's weighted least-squares tensor with its fitted S0 (a
         cross-check of prism's)
  csd    constrained spherical deconvolution (Tournier 2007), SH order 8,
         single-fibre response: a tensor with eigenvalues (1.7, 0.3, 0.3)e-3
         mm^2/s applied on every shell (DIPY's single-shell CSD, used here on
         the multi-shell table as in the paper's comparison set)
  rumba  RUMBA-SD (Canales-Rodriguez 2015), DIPY's default responses
         (white matter (1.7, 0.2, 0.2)e-3, grey matter 0.8e-3, CSF 3e-3
         mm^2/s), --rumba-iter iterations, global fit without TV
         (voxelwise=False), sphere symmetric362

Requires Debian's python3-dipy and python3-nibabel (apt-get install -y
python3-dipy python3-nibabel); run with /usr/bin/python3:

  prism dmri loocv --dwi D/dwi.nii.gz --bval D/dwi.bval --bvec D/dwi.bvec \
      --mask D/mask.nii.gz --model b3s --out /tmp/loo-b3s
  /usr/bin/python3 bench/dipy_loocv.py --dwi D/dwi.nii.gz --bval D/dwi.bval \
      --bvec D/dwi.bvec --prism /tmp/loo-b3s --json /tmp/loo-b3s/dipy.json
"""

import argparse
import json
import sys
import time
import warnings

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dwi", required=True)
    ap.add_argument("--bval", required=True)
    ap.add_argument("--bvec", required=True)
    ap.add_argument("--prism", required=True, help="output folder of prism dmri loocv")
    ap.add_argument("--methods", default="dti,csd,rumba")
    ap.add_argument("--rumba-iter", type=int, default=200)
    ap.add_argument("--json", default="")
    a = ap.parse_args()

    import nibabel as nib
    from dipy.core.gradients import gradient_table

    warnings.simplefilter("ignore")
    img = nib.load(a.dwi)
    data = np.asarray(img.dataobj, dtype=np.float64)
    bvals = np.loadtxt(a.bval).ravel()
    bvecs = np.loadtxt(a.bvec)
    if bvecs.shape[0] != 3:
        bvecs = bvecs.T
    with open(a.prism + "/loocv.json") as f:
        rep = json.load(f)
    held = rep["held_out_volumes"]
    wm_img = nib.load(a.prism + "/wm_mask.nii.gz")
    wm = np.asarray(wm_img.dataobj) > 0
    dti_map = np.asarray(nib.load(a.prism + "/loo_rmse_dti.nii.gz").dataobj)
    fitted = dti_map > 0  # the voxels prism fitted (0 outside)
    if data.shape[:3] != fitted.shape:
        sys.exit(f"{a.dwi}: grid {data.shape[:3]}, prism's maps {fitted.shape}")

    b0 = bvals <= 50
    sig = data[fitted]  # (V, N)
    s0 = sig[:, b0].mean(axis=1)
    y = sig / s0[:, None]
    wmv = wm[fitted]
    n = len(bvals)

    def fit_predict(method, keep, j):
        g = gradient_table(bvals[keep], bvecs[:, keep], b0_threshold=50)
        gj = gradient_table(bvals, bvecs, b0_threshold=50)
        x = y[:, keep]
        if method == "dti":
            from dipy.reconst.dti import TensorModel
            f = TensorModel(g, fit_method="WLS", return_S0_hat=True).fit(x)
            # With the fitted S0, as prism's tensor prediction.
            return f.predict(gj, S0=f.S0_hat)[:, j]
        if method == "csd":
            from dipy.reconst.csdeconv import ConstrainedSphericalDeconvModel
            m = ConstrainedSphericalDeconvModel(g, (np.array([1.7e-3, 0.3e-3, 0.3e-3]), 1.0), sh_order=8)
            out = np.empty(len(x))
            for v in range(len(x)):
                f = m.fit(x[v])
                out[v] = m.predict(f.shm_coeff, gtab=gj, S0=1.0)[j]
            return out
        if method == "rumba":
            from dipy.reconst.rumba import RumbaSDModel
            from dipy.data import get_sphere
            # Global (not voxel-wise) fit: DIPY's vectorised RUMBA over all
            # voxels at once, without the TV prior, as (V, 1, 1, N).
            m = RumbaSDModel(g, n_iter=a.rumba_iter, sphere=get_sphere("symmetric362"), voxelwise=False)
            f = m.fit(x[:, None, None, :])
            return np.asarray(f.predict(gtab=gj, S0=1.0))[:, 0, 0, j]
        raise SystemExit(f"unknown method {method}")

    results = {}
    for method in a.methods.split(","):
        t0 = time.time()
        err2 = np.zeros(len(y))
        for j in held:
            keep = np.ones(n, bool)
            keep[j] = False
            p = fit_predict(method, keep, j)
            err2 += (p - y[:, j]) ** 2
        rmse = np.sqrt(err2 / len(held))
        ok = np.isfinite(rmse)
        results[method] = {
            "voxels": int(ok.sum()),
            "median_rmse": float(np.median(rmse[ok])),
            "mean_rmse": float(np.mean(rmse[ok])),
            "wm_voxels": int((ok & wmv).sum()),
            "wm_median_rmse": float(np.median(rmse[ok & wmv])),
            "wm_mean_rmse": float(np.mean(rmse[ok & wmv])),
            "seconds": time.time() - t0,
        }
        print(f"{method:8s} median RMSE {results[method]['median_rmse']:.4f} "
              f"(white matter {results[method]['wm_median_rmse']:.4f}), {results[method]['seconds']:.0f} s", flush=True)
    for m in rep["methods"]:
        print(f"prism {m['method']:22s} median RMSE {m['median_rmse']:.4f} (white matter {m['wm_median_rmse']:.4f})")
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump({"held_out_volumes": held, "dipy": results, "prism": rep["methods"]}, f, indent=2)
        import os
        os.replace(a.json + ".tmp", a.json)


if __name__ == "__main__":
    main()
