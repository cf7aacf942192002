#!/usr/bin/env bash
# Compares one training step (and the parameter decoder's inference pass) of
# prism's reference network on the Go engine against the identical PyTorch
# network on this machine, in one run, alternating the two.
#
# Usage: bench/engine_vs_torch.sh [ROUNDS] [STEPS]
#   ROUNDS  alternations Go/PyTorch (default 3, at least 3)
#   STEPS   timed steps per round after warm-up (default 5)
# The last line printed is one JSON object:
#   {"go_step_s":…, "torch_step_s":…, "ratio":…, "go_gflops":…, "go_infer_s":…, "torch_infer_s":…,
#    "infer_ratio":…, "peak_gflops":…, "fraction_of_peak":…, "kernels":…, "cpu":…}
# ratio = go_step_s / torch_step_s and infer_ratio = go_infer_s /
# torch_infer_s (medians over all rounds). peak_gflops is this machine's
# sgemm peak measured in the same run (BenchmarkSgemmPeak: OpenBLAS, 2048³,
# split over both cores, median over the rounds), and fraction_of_peak =
# go_gflops / peak_gflops, so that a figure is never compared with another
# machine's peak.
#
# PRISM_KERNELS=avx2 (or generic) forces prism's kernel path and makes the
# whole run behave like a CPU without AVX-512: OpenBLAS is told to use its
# Haswell kernels (OPENBLAS_CORETYPE) and PyTorch its AVX2 ones
# (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA), so that an AVX-512 machine
# can stand in for an AVX2-only one.
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

case "${PRISM_KERNELS:-}" in
  avx2|generic)
    export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
    export ATEN_CPU_CAPABILITY=${ATEN_CPU_CAPABILITY:-avx2}
    export ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-AVX2}
    ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/refnet.test" ./engine/refnet
go test -c -o "$tmp/kernels.test" ./engine/kernels
go build -o "$tmp/prism" ./cmd/prism
kernels=$("$tmp/prism" version | awk '/^kernels:/ {print $2}')
cpu=$(lscpu | awk -F: '/Model name/ {gsub(/^[ \t]+/, "", $2); print $2; exit}')

go_steps=(); go_infer=(); go_flops=""; torch_steps=(); torch_infer=(); peaks=()
for r in $(seq 1 "$rounds"); do
  pk=$("$tmp/kernels.test" -test.run '^$' -test.bench '^BenchmarkSgemmPeak$' -test.benchtime 5x -test.count 1 |
       awk '/^BenchmarkSgemmPeak/ {print $3}')
  peaks+=("$(awk -v n="$pk" 'BEGIN{printf "%.3f", 2*2048^3/n}')")
  echo "round $r sgemm peak: ${peaks[-1]} GFLOP/s" >&2
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
pk=$(median "${peaks[@]}")
awk -v gs="$gs" -v ts="$ts" -v gi="$gi" -v ti="$ti" -v fl="$go_flops" -v pk="$pk" -v kp="$kernels" -v cpu="$cpu" 'BEGIN {
  printf "{\"go_step_s\":%.4f,\"torch_step_s\":%.4f,\"ratio\":%.3f,\"go_gflops\":%.1f,\"go_infer_s\":%.4f,\"torch_infer_s\":%.4f,\"infer_ratio\":%.3f,\"peak_gflops\":%.1f,\"fraction_of_peak\":%.3f,\"kernels\":\"%s\",\"cpu\":\"%s\"}\n",
    gs, ts, gs/ts, fl/gs/1e9, gi, ti, gi/ti, pk, fl/gs/1e9/pk, kp, cpu }'
