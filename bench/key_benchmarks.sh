#!/usr/bin/env bash
# Runs the benchmarks quoted in docs/benchmarks.md, one after another, and
# prints their raw `go test -bench` lines. Each benchmark reports wall time
# and, where it matters, process CPU time (cpu-s/op, cpu-µs/sim): on a busy
# machine the CPU figure is the stable one.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
b() { echo "## go test $*"; go test -run '^$' "$@" 2>&1 | grep -E '^(Benchmark|ok|FAIL)'; }
b -bench 'SgemmPeak' -benchtime 5x ./engine/kernels
b -bench 'RefNet(Step|Infer)$' -benchtime 5x ./engine/refnet
b -bench 'SimulateK50' -benchtime 3s ./family/symbolic
b -bench 'SimulateB3SUKB' -benchtime 400000x ./family/dmri
b -bench 'SimulateBSZTConvUKB$' -benchtime 100000x ./family/dmri
b -bench 'Train' -benchtime 20x ./train
b -bench 'SampleMasks|SampleTheta' -benchtime 3x ./posterior
b -bench 'VoxelDefault' -benchtime 40x ./mcmc
