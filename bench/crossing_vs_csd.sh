#!/bin/sh
# bench/crossing_vs_csd.sh — reproduces the table of issue 20 on the
# mrtrix3-msmt-slab scan: prism's amortized fit (`prism dmri fit`, defaults)
# and its BedpostX-style sampler (`prism dmri mcmc`, defaults) against
# MRtrix3 multi-shell multi-tissue CSD (dwi2response dhollander + dwi2fod
# msmt_csd + sh2peaks) and DIPY CSD, median angles as in the issue, and the
# CPU seconds per voxel of each method. Not part of CI.
#
# Needs Debian's MRtrix3 and DIPY (apt-get install -y mrtrix3 python3-dipy
# python3-nibabel) and a built prism:
#
#   go build -o /tmp/prism ./cmd/prism
#   bench/crossing_vs_csd.sh [-p PRISM] [-n NETWORK_FLAGS] [-d SCAN_DIR] [-o OUT_DIR]
#
# NETWORK_FLAGS default to "--model b3s-brain" (e.g. "--checkpoint runs/x").
# The scan folder needs dwi.nii.gz, dwi.bval, dwi.bvec and mask.nii.gz.
# Thresholds (bench/crossing_compare.py): a CSD peak is a fibre when its
# amplitude is ≥ 0.25 of the voxel's first peak, a stick when its mean
# fraction is > 0.05; MRtrix and DIPY agree on a crossing when both see two
# fibres and match within 15° each.
set -eu
PRISM=prism
NET="--model b3s-brain"
SCAN=/work/shared/data/dmri/mrtrix3-msmt-slab
OUT=crossing-vs-csd
PY=/usr/bin/python3
while getopts p:n:d:o: opt; do
	case $opt in
	p) PRISM=$OPTARG ;;
	n) NET=$OPTARG ;;
	d) SCAN=$OPTARG ;;
	o) OUT=$OPTARG ;;
	*) echo "usage: $0 [-p PRISM] [-n NETWORK_FLAGS] [-d SCAN_DIR] [-o OUT_DIR]" >&2; exit 2 ;;
	esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
for f in dwi.nii.gz dwi.bval dwi.bvec mask.nii.gz; do
	[ -f "$SCAN/$f" ] || { echo "$0: $SCAN/$f: missing" >&2; exit 1; }
done
for t in mrconvert dwi2response dwi2fod sh2peaks; do
	command -v $t >/dev/null || { echo "$0: $t not found (apt-get install -y mrtrix3)" >&2; exit 1; }
done
$PY -c 'import dipy, nibabel' 2>/dev/null || { echo "$0: $PY cannot import dipy/nibabel (apt-get install -y python3-dipy python3-nibabel)" >&2; exit 1; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
D="--dwi $SCAN/dwi.nii.gz --bval $SCAN/dwi.bval --bvec $SCAN/dwi.bvec --mask $SCAN/mask.nii.gz"
NV=$($PY -c "import nibabel as n, numpy as np; print(int((np.asarray(n.load('$SCAN/mask.nii.gz').dataobj) > 0).sum()))")

# cpu LABEL CMD…: runs CMD, appends "LABEL user+sys seconds" to $OUT/cpu.txt.
cpu() {
	label=$1
	shift
	/usr/bin/time -f "%U %S %e" -o "$OUT/time.$label" "$@" >"$OUT/log.$label" 2>&1 || { echo "$0: $label failed, see $OUT/log.$label" >&2; exit 1; }
	read -r u s e <"$OUT/time.$label"
	echo "$label $u $s $e" >>"$OUT/cpu.txt"
}
: >"$OUT/cpu.txt"

# MRtrix3: multi-shell multi-tissue CSD and its peaks (world coordinates).
M=$OUT/mrtrix
mkdir -p "$M"
cpu mrtrix sh -c "mrconvert -quiet -force -fslgrad $SCAN/dwi.bvec $SCAN/dwi.bval $SCAN/dwi.nii.gz $M/dwi.mif &&
	dwi2response -quiet -force -scratch $M dhollander -mask $SCAN/mask.nii.gz $M/dwi.mif $M/wm.txt $M/gm.txt $M/csf.txt &&
	dwi2fod -quiet -force msmt_csd -mask $SCAN/mask.nii.gz $M/dwi.mif $M/wm.txt $M/wm.mif $M/gm.txt $M/gm.mif $M/csf.txt $M/csf.mif &&
	sh2peaks -quiet -force -num 3 -mask $SCAN/mask.nii.gz $M/wm.mif $M/peaks.nii.gz"
# DIPY CSD (single shell at the highest b-value).
cpu dipy $PY "$HERE/crossing_compare.py" dipy "$SCAN/dwi.nii.gz" "$SCAN/dwi.bval" "$SCAN/dwi.bvec" "$SCAN/mask.nii.gz" "$OUT/dipy_peaks.nii.gz"
# prism: tensor (for FA), amortized fit, sampler.
cpu dti "$PRISM" dmri dti $D --out "$OUT/dti"
# shellcheck disable=SC2086
cpu fit "$PRISM" dmri fit $D $NET --out "$OUT/fit" --fresh --quiet
cpu mcmc "$PRISM" dmri mcmc $D --out "$OUT/mcmc"

$PY "$HERE/crossing_compare.py" table --mask "$SCAN/mask.nii.gz" --fa "$OUT/dti/dti_FA.nii.gz" \
	--mrtrix "$M/peaks.nii.gz" --dipy "$OUT/dipy_peaks.nii.gz" --fit "$OUT/fit" --mcmc "$OUT/mcmc" --json "$OUT/table.json"
echo
echo "CPU (user+sys) per voxel over the $NV mask voxels, whole processes (loading included):"
while read -r label u s e; do
	$PY -c "print(f'  {\"$label\":7s} {($u+$s)/$NV*1e3:8.2f} CPU-ms/voxel  ({$u+$s:.1f} CPU-s, {$e} s wall)')"
done <"$OUT/cpu.txt"
