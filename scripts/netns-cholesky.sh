#!/usr/bin/env bash
# netns-cholesky.sh - a real multi-host MPI run on one machine.
#
# It makes RANKS (2-4) network namespaces, each a "host" with two
# interfaces: a control one on bridge pzctl (10.77.0.0/24), over which
# mpirun reaches its daemons, and a data one on bridge pzdata
# (10.78.0.0/24), over which Open MPI's TCP transport carries the ranks'
# messages (no shared memory: btl tcp,self). mpirun runs in the root
# namespace and starts each daemon through an rsh agent that enters the
# host's namespace. Then it runs the distributed Cholesky three times:
#
#   1. as is, with --check (the residual must be small);
#   2. with every data link throttled by tc's tbf qdisc to RATE (netem
#      delay is added only where the kernel has netem): the run must take
#      less than the computation plus the communication alone, i.e. they
#      overlap (up to 3 attempts, each paired with an unthrottled run
#      just before it: the machine's speed changes between runs);
#   3. cutting the last rank's data link mid-run: the job must end, within
#      PZ_DIST_TIMEOUT plus a margin, with an error naming that rank.
#
# Needs root (network namespaces, tc). Usage, from the repository root:
#   sudo scripts/netns-cholesky.sh            # RANKS=2 N=6144 B=256 RATE=400mbit
# (N large enough that the computation is not dwarfed by the transfers at
# RATE: at N=3072 OpenBLAS's kernels factor in 0.28 s what takes 0.38 s to
# send, and the overlap the check measures was a few per cent.)
#   RANKS=4 sudo -E scripts/netns-cholesky.sh
set -euo pipefail
cd "$(dirname "$0")/.."

RANKS=${RANKS:-2}
N=${N:-6144}
B=${B:-256}
RATE=${RATE:-400mbit}
CUT_TIMEOUT=${CUT_TIMEOUT:-15s}

if [ "$(id -u)" != 0 ]; then
  echo "netns-cholesky.sh: needs root (it creates network namespaces and tc qdiscs); rerun with sudo" >&2
  exit 2
fi
if [ "$RANKS" -lt 2 ] || [ "$RANKS" -gt 4 ]; then
  echo "netns-cholesky.sh: RANKS must be 2 to 4, got $RANKS" >&2
  exit 2
fi
for cmd in ip tc mpirun go; do
  command -v "$cmd" >/dev/null || { echo "netns-cholesky.sh: $cmd not found" >&2; exit 2; }
done

tmp=$(mktemp -d)
ns() { echo "pzns$1"; }
cleanup() {
  if [ -n "${job:-}" ]; then kill "$job" 2>/dev/null || true; fi
  for n in $(ip netns list | awk '/^pzns[0-9]/ {print $1}'); do
    ip netns pids "$n" 2>/dev/null | xargs -r kill -9 2>/dev/null || true # daemons and ranks left running
    ip netns del "$n" 2>/dev/null || true
  done
  for l in $(ip -o link show | awk -F': ' '$2 ~ /^pz(ctl|data)/ {sub(/@.*/, "", $2); print $2}'); do
    ip link del "$l" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap 'status=$?; cleanup; exit $status' EXIT
cleanup 2>/dev/null || true
tmp=$(mktemp -d)

tags=mpi
if [ -e /usr/include/x86_64-linux-gnu/cblas.h ] || [ -e /usr/include/cblas.h ] || [ -e /usr/include/x86_64-linux-gnu/openblas-serial/cblas.h ]; then
  tags=mpi,cblas
fi
echo "== building pzrun (-tags $tags)"
go build -tags "$tags" -o "$tmp/pzrun" ./cmd/pzrun

echo "== $RANKS hosts: namespaces, control bridge pzctl, data bridge pzdata"
ip link add pzctl type bridge
ip link add pzdata type bridge
ip addr add 10.77.0.254/24 dev pzctl
ip link set pzctl up
ip link set pzdata up
: >"$tmp/hostfile"
mkdir -p "$tmp/hosts"
for i in $(seq 1 "$RANKS"); do
  n=$(ns "$i")
  ip netns add "$n"
  ip -n "$n" link set lo up
  for net in ctl data; do
    ip link add "pz${net}$i" type veth peer name "${net}0" netns "$n"
    ip link set "pz${net}$i" master "pz$net" up
    ip -n "$n" link set "${net}0" up
  done
  ip -n "$n" addr add "10.77.0.$i/24" dev ctl0
  ip -n "$n" addr add "10.78.0.$i/24" dev data0
  echo "10.77.0.$i slots=1" >>"$tmp/hostfile"
  echo "$n" >"$tmp/hosts/10.77.0.$i"
done

# The rsh agent: mpirun calls it as AGENT [options] HOST COMMAND...; it runs
# COMMAND in HOST's namespace.
# Each host gets a temporary directory of its own: the hosts share one
# file system and hostname, and Open MPI keys its session files by them.
cat >"$tmp/agent" <<EOF
#!/bin/sh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host=\$1; shift
mkdir -p "$tmp/tmp-\$host"
exec ip netns exec "\$(cat "$tmp/hosts/\$host")" env TMPDIR="$tmp/tmp-\$host" /bin/sh -c "\$*"
EOF
chmod +x "$tmp/agent"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun -n "$RANKS" --hostfile "$tmp/hostfile" --map-by node
  --mca plm_rsh_agent "$tmp/agent" --mca plm_rsh_no_tree_spawn 1
  --mca oob_tcp_if_include 10.77.0.0/24
  --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include 10.78.0.0/24
  -x PZ_DIST_TIMEOUT)

# run_mpi runs mpirun with a bound. Open MPI's launch through the agent
# now and then leaves a daemon unreported (nothing of pz has run yet): then
# it kills the daemons and tries once more.
run_mpi() {
  local attempt rc
  for attempt in 1 2; do
    rc=0
    timeout 150 "${mpi[@]}" "$@" </dev/null || rc=$?
    [ "$rc" -ne 124 ] && return "$rc"
    echo "   (mpirun did not finish within 150 s; attempt $attempt)" >&2
    for i in $(seq 1 "$RANKS"); do ip netns pids "$(ns "$i")" | xargs -r kill -9 2>/dev/null || true; done
    pkill -9 -f "mpirun -n $RANKS --hostfile $tmp/hostfile" 2>/dev/null || true
  done
  return 124
}

field() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" "$2"; }

echo "== 1. distributed Cholesky over TCP between namespaces, checked"
export PZ_DIST_TIMEOUT=5m
run_mpi "$tmp/pzrun" cholesky -n "$N" -b "$B" -precision 64 -check -json >"$tmp/plain.json"
cat "$tmp/plain.json"
t_plain=$(field seconds "$tmp/plain.json")

echo "== 2. data links throttled to $RATE"
throttle() {
  for i in $(seq 1 "$RANKS"); do
    ip netns exec "$(ns "$i")" tc qdisc add dev data0 root tbf rate "$RATE" burst 256kb latency 50ms
    if ip netns exec "$(ns "$i")" tc qdisc add dev data0 parent root handle 10: netem delay 1ms 2>/dev/null; then
      echo "   (netem: +1 ms on $(ns "$i"))"
    fi
  done
}
unthrottle() {
  for i in $(seq 1 "$RANKS"); do ip netns exec "$(ns "$i")" tc qdisc del dev data0 root 2>/dev/null || true; done
}
txbytes() { # the bytes the busiest host has sent on its data link
  for i in $(seq 1 "$RANKS"); do ip netns exec "$(ns "$i")" cat /sys/class/net/data0/statistics/tx_bytes; done
}
# The check compares a throttled run with an unthrottled one, and this
# machine's speed changes between runs (a loaded CI host, other jobs):
# up to 3 attempts, each a pair measured back to back (the first reuses
# run 1's time); the property holds when one attempt shows the overlap.
# An implementation that does not overlap is slower than computation
# plus communication in every attempt.
for attempt in 1 2 3; do
  if [ "$attempt" -gt 1 ]; then
    unthrottle
    run_mpi "$tmp/pzrun" cholesky -n "$N" -b "$B" -precision 64 -json >"$tmp/plain.json"
    t_plain=$(field seconds "$tmp/plain.json")
  fi
  throttle
  tx0=$(txbytes)
  run_mpi "$tmp/pzrun" cholesky -n "$N" -b "$B" -precision 64 -json >"$tmp/slow.json"
  cat "$tmp/slow.json"
  t_slow=$(field seconds "$tmp/slow.json")
  if python3 - "$t_plain" "$t_slow" "$RATE" "$tx0" "$(txbytes)" "$attempt" <<'EOF'
import re, sys
plain, slow, rate, attempt = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], int(sys.argv[6])
before, after = map(int, sys.argv[4].split()), map(int, sys.argv[5].split())
busiest = max(a - b for a, b in zip(after, before))
m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", rate)
bps = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
comm = busiest * 8 / bps  # the busiest link's transfers alone, at the throttled rate
print(f"   attempt {attempt}: unthrottled {plain:.3f} s; the busiest host sent {busiest/2**20:.1f} MiB: {comm:.3f} s at {rate}; throttled {slow:.3f} s")
if slow >= plain + comm:
    print(f"   no overlap in attempt {attempt}: {slow:.3f} s >= {plain:.3f} + {comm:.3f} s")
    sys.exit(1)
print(f"   overlap: {slow:.3f} s < computation + communication = {plain + comm:.3f} s ({100 * (plain + comm - slow) / min(plain, comm):.0f}% of the shorter hidden)")
EOF
  then
    break
  fi
  if [ "$attempt" -eq 3 ]; then
    echo "FAIL: no overlap in 3 attempts" >&2
    exit 1
  fi
done

echo "== 3. the last rank's data link cut mid-run (PZ_DIST_TIMEOUT=$CUT_TIMEOUT)"
unthrottle
export PZ_DIST_TIMEOUT=$CUT_TIMEOUT
big=$((N * 2))
rxbytes() { ip netns exec "$(ns "$RANKS")" cat /sys/class/net/data0/statistics/rx_bytes; }
rx0=$(rxbytes)
start=$(date +%s)
timeout 300 "${mpi[@]}" "$tmp/pzrun" cholesky -n "$big" -b "$B" -precision 64 </dev/null >"$tmp/cut.out" 2>&1 &
job=$!
# Cut once the factorization is under way: tiles have started to move.
for _ in $(seq 1 1200); do
  [ "$(rxbytes)" -gt $((rx0 + 4 * B * B * 8)) ] && break
  sleep 0.05
done
ip -n "$(ns "$RANKS")" link set data0 down
echo "   cut $(ns "$RANKS") (rank $((RANKS - 1))) after $(($(date +%s) - start)) s"
status=0
wait "$job" || status=$?
elapsed=$(($(date +%s) - start))
tail -n 12 "$tmp/cut.out" | sed 's/^/   | /'
if [ "$status" -eq 0 ]; then
  echo "FAIL: the job succeeded although a link was cut" >&2; exit 1
fi
if [ "$status" -eq 124 ]; then
  echo "FAIL: the job did not end within 300 s" >&2; exit 1
fi
# The job ends with the first rank that gives up: the cut rank, or one
# that waits for it; either way the error names the unreachable rank.
cut=$((RANKS - 1))
if ! grep -q "no progress" "$tmp/cut.out" ||
  ! grep -Eq "pz: rank $cut of $RANKS failed|(from|to) rank $cut[^0-9]|rank $cut left" "$tmp/cut.out"; then
  echo "FAIL: the error does not say that rank $cut stopped answering" >&2; exit 1
fi
echo "   the job ended after ${elapsed} s (exit $status), naming rank $((RANKS - 1))"
echo "== netns-cholesky: all passed"
