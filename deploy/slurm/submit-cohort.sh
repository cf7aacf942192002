#!/usr/bin/env bash
# Queues a whole cohort on SLURM: one array task per participant
# (prism-bids-participant.sbatch), then the group level (cohort table and
# QC page) once every task has ended, whether it succeeded or not.
#
#   submit-cohort.sh BIDS_DIR OUT_DIR [prism bids flags...]
#
# MAX_PARALLEL (default 100) caps the tasks running at once; extra
# sbatch options (partition, account) go in SBATCH_OPTS. Prints the two
# job ids.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 2 ]; then
  echo "usage: $0 BIDS_DIR OUT_DIR [prism bids flags...]" >&2
  exit 2
fi
bids_dir=$1
out_dir=$2
shift 2
n=$(find "$bids_dir" -mindepth 1 -maxdepth 1 -type d -name 'sub-*' | wc -l)
if [ "$n" -eq 0 ]; then
  echo "$bids_dir: no sub-* folders" >&2
  exit 1
fi
read -r -a opts <<< "${SBATCH_OPTS:-}"
array=$(sbatch --parsable "${opts[@]}" --array="0-$((n - 1))%${MAX_PARALLEL:-100}" \
  "$here/prism-bids-participant.sbatch" "$bids_dir" "$out_dir" "$@")
group=$(sbatch --parsable "${opts[@]}" --dependency="afterany:${array%%;*}" --job-name=prism-bids-group \
  --cpus-per-task=1 --mem=2G --time=00:30:00 \
  --wrap="\"${PRISM:-prism}\" bids \"$bids_dir\" \"$out_dir\" group")
echo "participants: job $array ($n tasks); group: job $group"
