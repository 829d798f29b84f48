#!/usr/bin/env bash
# The GPU path's training algorithm, measured on a CPU (issue 44): stacked networks (one model
# over a network axis, a device-side Adam, best weights kept with torch.where) round differently
# from networks trained one by one, so their tables are not the CPU's bit for bit. This runs the
# quick paper-protocol profiles of the four synthetic experiments both ways on this CPU and says
# which paired claims hold in both (scripts/claims_hold.py).
#
#   scripts/stacked_on_cpu.sh        # about 15 minutes on 2 cores
#
# Writes benchmarks/results/stacked-path/{cpu,stacked}/<experiment>-paper-quick.json and
# docs/stacked-path-claims.md. Run from the repository root after `make setup`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
DEST=benchmarks/results/stacked-path
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$DEST/cpu" "$DEST/stacked"
for experiment in parameter length composition composition-depth3; do
    for path in cpu stacked; do
        stacked=0; [ "$path" = stacked ] && stacked=1
        TASKEXTRAP_STACKED=$stacked $PY -m taskextrap.cli reproduce "$experiment" --profile quick \
            --protocol paper --unit-cpus 1 --out "$WORK/$path/$experiment" --no-plots --quiet
        cp "$WORK/$path/$experiment/$experiment-paper-quick/results.json" "$DEST/$path/$experiment-paper-quick.json"
    done
done
status=0
$PY scripts/claims_hold.py "$DEST/cpu" "$DEST/stacked" --names CPU "CPU, stacked path" \
    --markdown docs/stacked-path-claims.md || status=$?
echo "written: $DEST and docs/stacked-path-claims.md"
exit $status
