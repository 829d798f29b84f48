#!/usr/bin/env bash
# Keep a long benchmark re-make across sessions: the unit cache (benchmarks/results/runs, which git
# ignores) is lost with a checkout, so finished units are copied into a committed folder.
#
#   scripts/keep_units.sh save RUNS [KEPT]      # RUNS/units/*.json and each run's plots -> KEPT
#   scripts/keep_units.sh restore RUNS [KEPT]   # KEPT -> RUNS (then the same command resumes)
#
# An unfinished unit's mid-training checkpoints (RUNS/units/NAME-FINGERPRINT.training) go along, so
# its networks train on from where they stood. KEPT defaults to benchmarks/results/kept-units.
# A unit's file name carries its fingerprint (its
# settings and the package's source hash), so a unit is reused only by the same source; a run's
# plots (with their manifest, .plots.json) go along so that a unit that draws is not recomputed.
set -euo pipefail
mode=${1:?save or restore}; runs=${2:?the runs folder}; kept=${3:-benchmarks/results/kept-units}

# keep_training PART TO FINISHED [-n]: copy the checkpoints (*.safetensors) of the unfinished unit
# PART (a NAME-FINGERPRINT.training folder) into TO (with -n not over one already there); a unit
# that finished (its NAME-FINGERPRINT.json in FINISHED or TO) needs none: its stale folder goes.
keep_training() {
  local part=$1 to=$2 finished=$3 clobber=${4:-} unit
  [ -d "$part" ] || return 0
  unit=${part##*/}; unit=${unit%.training}
  if [ -f "$finished/$unit.json" ] || [ -f "$to/$unit.json" ]; then
    rm -rf "$part" "$to/$unit.training"; return 0
  fi
  for f in "$part"/*.safetensors; do
    [ -f "$f" ] || continue
    mkdir -p "$to/$unit.training"
    cp $clobber "$f" "$to/$unit.training/" || true  # -n: an existing file is not an error
  done
}
case $mode in
  save)
    mkdir -p "$kept/units"
    cp -n "$runs"/units/*.json "$kept/units/" 2>/dev/null || true
    for part in "$runs"/units/*.training; do  # an unfinished unit's mid-training checkpoints
      keep_training "$part" "$kept/units" "$runs/units"
    done
    for plots in "$runs"/*/plots; do
      [ -f "$plots/.plots.json" ] || continue
      run=$(basename "$(dirname "$plots")")
      mkdir -p "$kept/plots/$run" && cp "$plots"/*.png "$plots/.plots.json" "$kept/plots/$run/"
    done
    echo "kept $(ls "$kept/units" | grep -c '\.json$') unit(s) in $kept" ;;
  restore)
    mkdir -p "$runs/units"
    cp -n "$kept"/units/*.json "$runs/units/" 2>/dev/null || true
    for part in "$kept"/units/*.training; do
      keep_training "$part" "$runs/units" "$kept/units" -n
    done
    for plots in "$kept"/plots/*; do
      [ -d "$plots" ] || continue
      mkdir -p "$runs/$(basename "$plots")/plots" && cp "$plots"/*.png "$plots/.plots.json" "$runs/$(basename "$plots")/plots/"
    done
    echo "restored $(ls "$runs/units" | wc -l) unit(s) into $runs/units" ;;
  *) echo "keep_units.sh: the mode is save or restore, not '$mode'" >&2; exit 2 ;;
esac
