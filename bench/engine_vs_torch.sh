#!/usr/bin/env bash
# Compares one training step (and the parameter decoder's inference pass) of
# prism's reference network on the Go engine against the identical PyTorch
# network on this machine, in one run, alternating the two.
#
# Usage: bench/engine_vs_torch.sh [ROUNDS] [STEPS]
#   ROUNDS  alternations Go/PyTorch (default 3, at least 3)
#   STEPS   timed steps per round after warm-up (default 5)
# The last line printed is one JSON object:
#   {"go_step_s":…, "torch_step_s":…, "ratio":…, "go_gflops":…, "go_infer_s":…, "torch_infer_s":…}
# ratio = go_step_s / torch_step_s (medians over all rounds).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
steps=${2:-5}
[ "$rounds" -ge 3 ] || rounds=3

py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "installing python3-torch with apt…" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >&2
fi
export PATH="/usr/local/go/bin:$PATH"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/refnet.test" ./engine/refnet

go_steps=(); go_infer=(); go_flops=""; torch_steps=(); torch_infer=()
for r in $(seq 1 "$rounds"); do
  out=$("$tmp/refnet.test" -test.run '^$' -test.bench '^BenchmarkRefNet(Step|Infer)$' \
        -test.benchtime "${steps}x" -test.count 1)
  step_ns=$(awk '/^BenchmarkRefNetStep/ {print $3}' <<<"$out")
  infer_ns=$(awk '/^BenchmarkRefNetInfer/ {print $3}' <<<"$out")
  go_flops=$(awk '/^BenchmarkRefNetStep/ {for (i=1;i<=NF;i++) if ($i=="flop/step") print $(i-1)}' <<<"$out")
  go_steps+=("$(awk -v n="$step_ns" 'BEGIN{printf "%.6f", n/1e9}')")
  go_infer+=("$(awk -v n="$infer_ns" 'BEGIN{printf "%.6f", n/1e9}')")
  echo "round $r go:    step ${go_steps[-1]} s, infer ${go_infer[-1]} s" >&2

  tj=$("$py" bench/torch_refnet.py "$steps" | tail -n 1)
  torch_steps+=("$("$py" -c 'import json,sys; print(json.loads(sys.argv[1])["step_s"])' "$tj")")
  torch_infer+=("$("$py" -c 'import json,sys; print(json.loads(sys.argv[1])["infer_s"])' "$tj")")
  echo "round $r torch: step ${torch_steps[-1]} s, infer ${torch_infer[-1]} s" >&2
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
gs=$(median "${go_steps[@]}"); ts=$(median "${torch_steps[@]}")
gi=$(median "${go_infer[@]}"); ti=$(median "${torch_infer[@]}")
awk -v gs="$gs" -v ts="$ts" -v gi="$gi" -v ti="$ti" -v fl="$go_flops" 'BEGIN {
  printf "{\"go_step_s\":%.4f,\"torch_step_s\":%.4f,\"ratio\":%.3f,\"go_gflops\":%.1f,\"go_infer_s\":%.4f,\"torch_infer_s\":%.4f}\n",
    gs, ts, gs/ts, fl/gs/1e9, gi, ti }'
