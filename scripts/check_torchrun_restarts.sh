#!/usr/bin/env bash
# What torchrun does when one process of a group dies (the README's "Beyond one machine" relies
# on it): rank 1 exits with status 1 on its first attempt, rank 0 would run 4 s more.
#   bash scripts/check_torchrun_restarts.sh            # prints each process's start and end
# Seen with torch 2.13 (2026-11-24): without --max-restarts the job fails and rank 0 is stopped
# before its end; with --max-restarts 1 BOTH ranks are stopped and started again (attempt 1):
# torchrun restarts the whole group, never one rank.
set -u
TORCHRUN=${TORCHRUN:-$(dirname "$0")/../.venv/bin/torchrun}
dir=$(mktemp -d)
cat > "$dir/worker.py" <<'PY'
import os, sys, time
rank, attempt = int(os.environ["RANK"]), int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
log = os.path.join(os.path.dirname(__file__), "log.txt")
open(log, "a").write(f"start rank={rank} attempt={attempt}\n")
if rank == 1 and attempt == 0:
    time.sleep(1)
    sys.exit(1)
time.sleep(4)
open(log, "a").write(f"end   rank={rank} attempt={attempt}\n")
PY
for restarts in 0 1; do
  rm -f "$dir/log.txt"
  "$TORCHRUN" --nproc_per_node 2 --max-restarts "$restarts" "$dir/worker.py" >"$dir/out.txt" 2>&1
  echo "--max-restarts $restarts: torchrun exit status $?"
  sort "$dir/log.txt" | sed 's/^/  /'
done
rm -rf "$dir"
