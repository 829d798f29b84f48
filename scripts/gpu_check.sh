#!/usr/bin/env bash
# The prepared GPU session of issue 44: everything that needs a GPU, in one go, on a machine
# whose torch sees CUDA. Run from the repository root after `make setup` (the venv must hold a
# CUDA build of torch: .venv/bin/pip install torch==2.13.* --index-url https://download.pytorch.org/whl/cu128).
# On this workplace's lent GPU machine (no registry; 15 minutes of device time in all) run
# scripts/gpu_device.sh instead: it prepares that python3 and runs steps 1-2 in timed shares; step 3
# would take over an hour there (one parameter unit is 55 s on an H200, and a protocol has 15).
#
#   scripts/gpu_check.sh [OUT]      # OUT: where the GPU runs go (default runs/gpu)
#
# 1. the GPU tests (pytest -m gpu: CUDA graphs against eager steps and the CPU, a unit on CUDA);
# 2. the speed benchmark's GPU column (benchmarks/speed.py --device cuda --label gpu: one paper
#    unit per synthetic experiment, with nvidia-smi's SM utilisation and the step counters);
# 3. every synthetic paper profile, both protocols, three seeds, on this one GPU (units shared
#    four to a GPU under Ray), timed: the issue's 15-minute target;
# 4. the GPU tables beside the committed CPU tables: which paired claims hold on both
#    (scripts/claims_hold.py; this script exits 1 when one does not).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/gpu}
PY=.venv/bin/python
export HF_HUB_OFFLINE=1
$PY -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device: nothing to check here')"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT.gpu.txt" 2>/dev/null || true
mkdir -p "$OUT"

echo "== 1. GPU tests"
$PY -m pytest -q -m gpu

echo "== 2. speed: one paper unit per experiment on the GPU"
$PY benchmarks/speed.py --device cuda --label gpu --only parameter length composition composition-depth3

echo "== 3. every synthetic paper profile, both protocols, 3 seeds, on one GPU"
EXPERIMENTS=(parameter parameter-ablations parameter-multistep length length-ablations composition
             composition-ablations composition-depth3)
# under Ray four units share the GPU; without Ray (its wheel, 79 MB, is over what travels to the
# lent machine: scripts/gpu_device.sh) they run one after another
executor=(--executor ray --units-per-gpu 4)
$PY -c "import ray" 2>/dev/null || executor=(--executor serial)
start=$(date +%s)
for protocol in paper strict; do
    .venv/bin/taskextrap sweep "${EXPERIMENTS[@]}" --protocols "$protocol" --profile paper \
        --device cuda "${executor[@]}" --out "$OUT" --no-plots --quiet
done
echo "all synthetic paper tables on one GPU: $(( $(date +%s) - start )) s" | tee "$OUT/wall.txt"

echo "== 4. the GPU tables beside the committed CPU tables"
failed=0
for run in "$OUT"/*/; do
    name=$(basename "$run")
    cpu=benchmarks/results/${name}.json
    if [ -f "$cpu" ] && [ -f "$run/results.json" ]; then
        $PY scripts/claims_hold.py "$cpu" "$run/results.json" --markdown "$OUT/$name-claims.md" || failed=1
    fi
done
echo "done: $OUT (claims in $OUT/*-claims.md, speed in benchmarks/results/speed.json)"
exit $failed
