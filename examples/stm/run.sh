#!/usr/bin/env bash
# Runs the camera pipeline of examples/stm (docs/static-schedules.md):
# compiles pipeline.yaml, starts the master for 200 periods of 10 ms, then
# the planner and the camera (the reverse of the schedule's order: clients
# and master start in any order), waits for the three and analyses the run.
# Exits non-zero if the schedule does not compile, if any process fails or
# if the planner found a wrong detection; overruns on a loaded machine are
# reported by the analysis, not failures.
# Usage: examples/stm/run.sh [OUTDIR]   (OUTDIR keeps the plan, the run record and its SVG)
set -euo pipefail
cd "$(dirname "$0")/../.."

# A private directory for the socket, the shared board and the clients'
# shared memory: only this user may connect.
tmp=$(mktemp -d)
chmod 700 "$tmp"
out=${1:-$tmp}
mkdir -p "$out"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

echo "--- compile the schedule"
go run ./cmd/pzrun stm compile examples/stm/pipeline.yaml -o "$out/pipeline.stm"

echo "--- build pzrun and the two clients"
go build -o "$tmp/bin/" ./cmd/pzrun ./examples/stm/camera ./examples/stm/planner

echo "--- run: master, then planner, then camera, in $tmp"
"$tmp/bin/pzrun" stm master "$out/pipeline.stm" -frames 200 -o "$out/run.json" -dir "$tmp" >"$tmp/master.out" &
pids+=($!)
"$tmp/bin/planner" -dir "$tmp" &
pids+=($!)
"$tmp/bin/camera" -dir "$tmp" &
pids+=($!)
for _ in "${pids[@]}"; do
  if ! wait -n; then
    echo "run.sh: a process of the run failed (see above); stopping the others" >&2
    exit 1
  fi
done
pids=()

echo "--- analyze the run"
"$tmp/bin/pzrun" stm analyze "$out/run.json" -svg "$out/run.svg"
