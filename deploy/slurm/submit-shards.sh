#!/usr/bin/env bash
# Queues the fit of one large scan as N shards on SLURM
# (prism-fit-shard.sbatch), then `prism dmri merge` once all succeeded.
#
#   submit-shards.sh N OUT_DIR [prism dmri fit flags...]
#
# Extra sbatch options go in SBATCH_OPTS. Prints the two job ids. If a
# shard fails, the merge is not run: resubmit the failed task alone
# (sbatch --array=I prism-fit-shard.sbatch ...), then run the merge.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 2 ]; then
  echo "usage: $0 N OUT_DIR [prism dmri fit flags...]" >&2
  exit 2
fi
n=$1
out_dir=$2
shift 2
read -r -a opts <<< "${SBATCH_OPTS:-}"
array=$(sbatch --parsable "${opts[@]}" --array="0-$((n - 1))" "$here/prism-fit-shard.sbatch" "$out_dir" "$@")
merge=$(sbatch --parsable "${opts[@]}" --dependency="afterok:${array%%;*}" --job-name=prism-merge \
  --cpus-per-task=1 --mem=4G --time=00:30:00 \
  --wrap="\"${PRISM:-prism}\" dmri merge \"$out_dir\"")
echo "shards: job $array ($n tasks); merge: job $merge"
