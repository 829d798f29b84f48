#!/usr/bin/env bash
# The lent GPU machine's side of scripts/gpu_check.sh. That machine reaches no registry and brings
# its own CUDA build of torch (2.11+cu130 when last seen) under Python 3.12, so the project is not
# installed from pyproject there: its python3 with the missing pure-Python wheels carried in from
# here (.whl/, see below) and the package by path. Every step has a share of a
# fixed time budget and its log and files land in $OUT, so a step that runs out of time or breaks
# still returns what came before it.
#
#   here, once:  python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#                  --implementation cp --platform manylinux_2_17_x86_64 -d .whl \
#                  jsonschema jsonschema-specifications referencing rpds-py py-spy
#   there:       export TASKEXTRAP_COMMIT=<the commit sent>
#                bash scripts/gpu_device.sh BUDGET_S tests            # env and the GPU tests
#                bash scripts/gpu_device.sh BUDGET_S smoke            # the same, then tiny units on CUDA
#                bash scripts/gpu_device.sh BUDGET_S speed EXP...     # speed.py's GPU column, EXP each
#                bash scripts/gpu_device.sh BUDGET_S profile EXP...   # a paper unit under py-spy, EXP each
#
# smoke: nvidia-smi and torch's view of the device, `pytest -m gpu`, then the tiny unit of each
# synthetic experiment on cuda (what breaks shows in seconds). speed: benchmarks/speed.py --device
# cuda --label gpu, one experiment per call so each record is written as it finishes; speed.json
# comes back in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
BUDGET=${1:?usage: gpu_device.sh BUDGET_S tests|smoke|speed|profile [EXPERIMENT...]}
MODE=${2:?usage: gpu_device.sh BUDGET_S tests|smoke|speed|profile [EXPERIMENT...]}
shift 2
OUT=${OUT:-runs/gpu-device}
mkdir -p "$OUT"
DEADLINE=$(( $(date +%s) + BUDGET - 20 ))  # 20 s kept for the last copies and a killed step's grace
failed=0
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
# the copy's .git need not be the checkout's (one was the session's first commit): name the
# commit sent, which speed.py records
export TASKEXTRAP_COMMIT=${TASKEXTRAP_COMMIT:?set TASKEXTRAP_COMMIT to the commit sent}
LOG="$OUT/log.txt"

left() { echo $(( DEADLINE - $(date +%s) )); }
step() {  # step NAME SECONDS COMMAND...: run with at most SECONDS (or what is left), log, keep going
    local name=$1 limit=$2; shift 2
    local budget; budget=$(left)
    (( limit < budget )) && budget=$limit
    if (( budget < 5 )); then echo "== $name: skipped (no time left)" | tee -a "$LOG"; return; fi
    echo "== $name (at most ${budget} s)" | tee -a "$LOG"
    local t0; t0=$(date +%s)
    timeout --signal=INT --kill-after=10 "$budget" "$@" >>"$LOG" 2>&1
    local rc=$?
    (( rc != 0 )) && failed=1
    echo "== $name: rc $rc, $(( $(date +%s) - t0 )) s" | tee -a "$LOG"
    [ -f benchmarks/results/speed.json ] && cp benchmarks/results/speed.json "$OUT/speed.json"
}

if [ ! -x .venv/bin/python ]; then
    # python3 there is itself a venv (/opt/torch/.venv): a venv made from it would see the base
    # interpreter's packages, not its torch. So the wheels and a .pth naming src/ go into its own
    # site-packages (the machine is bare each time), and .venv/bin holds wrappers that exec it.
    pybin=$(python3 -c 'import sys; print(sys.executable)')
    site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl \
        || { echo "the carried wheels (.whl/, see above) did not install" | tee -a "$LOG"; exit 1; }
    echo "$PWD/src" > "$site/taskextrap-src.pth"
    mkdir -p .venv/bin
    printf '#!/bin/sh\nexec "%s" "$@"\n' "$pybin" > .venv/bin/python
    printf '#!/bin/sh\nexec "%s" -m taskextrap.cli "$@"\n' "$pybin" > .venv/bin/taskextrap
    chmod +x .venv/bin/python .venv/bin/taskextrap
fi
PY=.venv/bin/python

case "$MODE" in
tests|smoke)
    step env 60 bash -c "nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; \
        nproc; $PY -c 'import torch, taskextrap, jsonschema; print(torch.__version__, torch.version.cuda, \
        torch.cuda.is_available(), torch.cuda.get_device_name(0))'"
    step gpu-tests 240 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/operators/test_stacked.py
    [ "$MODE" = smoke ] && for exp in parameter length composition composition-depth3; do
        family=(); [ "$exp" = parameter ] && family=(--family cubic)
        step "tiny $exp on cuda" 120 .venv/bin/taskextrap reproduce "$exp" --profile tiny --seed 0 "${family[@]}" \
            --device cuda --out "$OUT/tiny" --no-plots --quiet
        cp "$OUT"/tiny/"$exp"-*/results.json "$OUT/tiny-$exp.json" 2>/dev/null
    done
    ;;
speed)
    (( $# )) || { echo "speed: name the experiments to time" | tee -a "$LOG"; exit 2; }
    for exp in "$@"; do
        step "speed $exp" "$(left)" "$PY" benchmarks/speed.py --device cuda --label gpu --only "$exp"
    done
    ;;
profile)
    (( $# )) || { echo "profile: name the experiments to profile" | tee -a "$LOG"; exit 2; }
    for exp in "$@"; do
        step "profile $exp" "$(left)" "$PY" benchmarks/profile_unit.py "$exp" --device cuda --label gpu \
            --out "$OUT/profile-$exp.json"
    done
    ;;
*) echo "unknown mode $MODE (tests, smoke, speed or profile)"; exit 2 ;;
esac
rm -rf "$OUT/tiny"
echo "done with $(left) s of the budget left$( (( failed )) && echo '; a step failed')" | tee -a "$LOG"
exit $failed
