#!/bin/bash
# What must keep holding (issue 16): kill -9 then resume, same seed, one thread, no network.
# Usage: scripts/check_holds.sh   (prints one "same numbers" line per comparison; needs unshare)
set -u
cd "$(dirname "$0")/.."
T=.venv/bin/taskextrap
R=/tmp/holds; rm -rf $R; mkdir -p $R
export HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1
same() { .venv/bin/python scripts/same_results.py "$1" "$2"; }
killrun() {  # $1 out, $2 glob that marks progress, rest: args
  out=$1; glob=$2; shift 2
  $T "$@" --out $out --quiet --no-plots > $out.log 2>&1 & pid=$!
  for i in $(seq 1 600); do compgen -G "$out/$glob" > /dev/null && break; sleep 0.2; done
  kill -9 $pid; wait $pid 2>/dev/null
  echo "killed after: $(ls $out/$glob 2>/dev/null | wc -l) x $glob"
  $T "$@" --out $out --quiet --no-plots > $out.resume.log 2>&1; echo "resume exit $?"
}
echo "== parameter kill -9 / resume"
$T reproduce parameter --profile tiny --seeds 3 --out $R/p-full --quiet --no-plots > /dev/null
killrun $R/p-kill "units/parameter-*seed1*.json" reproduce parameter --profile tiny --seeds 3
same $R/p-full/parameter-paper-tiny $R/p-kill/parameter-paper-tiny
echo "== parity kill -9 / resume"
$T reproduce parity --profile tiny --out $R/y-full --quiet --no-plots > /dev/null
killrun $R/y-kill "*/*/*/ckpt-*/checkpoint.json" reproduce parity --profile tiny  # after the first checkpoint
same $R/y-full/parity-paper-tiny $R/y-kill/parity-paper-tiny
echo "== same seed, same numbers (parameter, length; one thread)"
$T reproduce parameter --profile tiny --seeds 3 --out $R/p-again --quiet --no-plots > /dev/null
same $R/p-full/parameter-paper-tiny $R/p-again/parameter-paper-tiny
$T reproduce length --profile tiny --out $R/l-1 --quiet --no-plots > /dev/null
$T reproduce length --profile tiny --out $R/l-2 --quiet --no-plots > /dev/null
same $R/l-1/length-paper-tiny $R/l-2/length-paper-tiny
echo "== parity with no network (unshare -n)"
unshare -n $T reproduce parity --profile tiny --out $R/y-offline --quiet --no-plots > $R/offline.log 2>&1; echo "offline exit $?"
same $R/y-full/parity-paper-tiny $R/y-offline/parity-paper-tiny
