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
case $mode in
  save)
    mkdir -p "$kept/units"
    cp -n "$runs"/units/*.json "$kept/units/" 2>/dev/null || true
    for part in "$runs"/units/*.training; do  # an unfinished unit's mid-training checkpoints
      if [ -d "$part" ]; then mkdir -p "$kept/units/${part##*/}" && cp "$part"/* "$kept/units/${part##*/}/"; fi
    done
    for plots in "$runs"/*/plots; do
      [ -f "$plots/.plots.json" ] || continue
      run=$(basename "$(dirname "$plots")")
      mkdir -p "$kept/plots/$run" && cp "$plots"/*.png "$plots/.plots.json" "$kept/plots/$run/"
    done
    echo "kept $(ls "$kept/units" | wc -l) unit(s) in $kept" ;;
  restore)
    mkdir -p "$runs/units"
    cp -n "$kept"/units/*.json "$runs/units/" 2>/dev/null || true
    for part in "$kept"/units/*.training; do
      if [ -d "$part" ]; then mkdir -p "$runs/units/${part##*/}" && cp -n "$part"/* "$runs/units/${part##*/}/"; fi
    done
    for plots in "$kept"/plots/*; do
      [ -d "$plots" ] || continue
      mkdir -p "$runs/$(basename "$plots")/plots" && cp "$plots"/*.png "$plots/.plots.json" "$runs/$(basename "$plots")/plots/"
    done
    echo "restored $(ls "$runs/units" | wc -l) unit(s) into $runs/units" ;;
  *) echo "keep_units.sh: the mode is save or restore, not '$mode'" >&2; exit 2 ;;
esac
