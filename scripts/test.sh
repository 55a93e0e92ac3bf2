#!/usr/bin/env bash
# Runs every test of pz: formatting, vet, the embedded backend under the race
# detector, the MPI backend under mpirun, and the OpenBLAS kernels.
# Installs OpenMPI and OpenBLAS from Debian's packages when they are missing
# and the user is root; otherwise it says what to install.
# Usage: scripts/test.sh            (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n=== %s\n' "$*"; }

need_pkgs=()
command -v mpirun >/dev/null 2>&1 || need_pkgs+=(openmpi-bin)
pkg-config --exists ompi 2>/dev/null || need_pkgs+=(libopenmpi-dev pkg-config)
# MPICH beside Open MPI (Open MPI stays the default mpicc/mpirun: Debian
# gives MPICH the lower alternatives priority); -tags mpi,mpich builds on it.
{ pkg-config --exists mpich 2>/dev/null && command -v mpiexec.mpich >/dev/null 2>&1; } || need_pkgs+=(libmpich-dev mpich)
[ -e /usr/include/x86_64-linux-gnu/cblas.h ] || [ -e /usr/include/cblas.h ] || [ -e /usr/include/x86_64-linux-gnu/openblas-serial/cblas.h ] || need_pkgs+=(libopenblas-dev)
if ((${#need_pkgs[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing ${need_pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" build-essential >/dev/null
  else
    echo "missing: ${need_pkgs[*]}; install them (e.g. sudo apt-get install ${need_pkgs[*]}) and rerun" >&2
    exit 1
  fi
fi

# cyclictest (Debian's rt-tests) gives pzrun stm bench its reference; the
# tests run without it.
if ! command -v cyclictest >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  log "installing rt-tests (cyclictest)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rt-tests >/dev/null 2>&1 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rt-tests >/dev/null; } ||
    echo "rt-tests not installed: pzrun stm bench will report no cyclictest figure"
fi

MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=none # containers often forbid CMA

# A scheduler whose tasks stop finishing says what they wait for (docs/scheduler.md,
# the watchdog): a test that hangs until its timeout shows it in its output.
export PZ_WATCHDOG="${PZ_WATCHDOG:-120s}"

log "gofmt"
bad=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$bad" ]; then echo "gofmt would change: $bad" >&2; exit 1; fi

log "go vet (default, -tags mpi, -tags cblas; darwin and freebsd)"
go vet ./...
go vet -tags mpi ./...
go vet -tags cblas ./...
# Cross-vet for macOS (where scientists rehearse with pzrun -n) and FreeBSD,
# so that a Linux-only call (affinity, gettid) slipping into a portable
# package fails here; purego needs its fakecgo flag on FreeBSD without cgo.
for target in darwin/arm64 freebsd/amd64; do
  echo "--- GOOS=${target%/*} GOARCH=${target#*/} go vet"
  GOOS=${target%/*} GOARCH=${target#*/} go vet -gcflags=github.com/ebitengine/purego/internal/fakecgo=-std ./...
done

log "go test -race ./... (embedded backend)"
go test -race -count=1 -timeout 30m ./...

log "go test -tags mpi (MPI backend; the tests start mpirun themselves)"
go test -tags mpi -count=1 -timeout 20m -skip '^TestLargeCounts$' ./comm/... ./runtimeview/... ./scheduler/dist/... ./cmd/... ./internal/mpiclib

log "buffers past 2^31-1 elements on both backends (GiBs each; one at a time)"
go test -count=1 -timeout 20m -run '^TestLargeCounts$' ./comm/local
go test -tags mpi -count=1 -timeout 20m -run '^(TestLargeCounts|TestSpawn)$' ./comm/mpi

log "conformance suite under mpirun -n 1, 2, 4"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -tags mpi -c -o "$tmp/mpi.test" ./comm/mpi
for n in 1 2 4; do
  echo "--- mpirun -n $n"
  "${MPIRUN[@]}" -n "$n" "$tmp/mpi.test" -test.v -test.count=1 -test.run 'Conformance' >"$tmp/out.$n" 2>&1 || { cat "$tmp/out.$n"; echo "FAIL: conformance under mpirun -n $n" >&2; exit 1; }
  passed=$(grep -c -- '--- PASS' "$tmp/out.$n" || true)
  if [ "$passed" -eq 0 ] || grep -q -- '--- FAIL' "$tmp/out.$n"; then cat "$tmp/out.$n"; echo "FAIL: conformance under mpirun -n $n" >&2; exit 1; fi
  echo "$passed subtests passed (summed over ranks)"
done

log "comm/mpi tests on an MPI the program initialized at MPI_THREAD_SERIALIZED, mpirun -n 2, 4"
SERIALIZED=1 RANKS="2 4" comm/mpi/mpitest.sh

# internal/mpiclib's Example checks the C library's communicators
# against the ranks' numbers: one process proves little, four do.
echo "--- internal/mpiclib Example under mpirun -n 4"
go test -tags mpi -c -o "$tmp/mpiclib.test" ./internal/mpiclib
"${MPIRUN[@]}" -n 4 "$tmp/mpiclib.test" -test.count=1 -test.run '^Example'

log "conformance suite on MPICH (-tags mpi,mpich) under mpiexec.mpich -n 1, 2, 4"
go vet -tags mpi,mpich ./comm/... ./runtimeview/... ./internal/...
go test -tags mpi,mpich -c -o "$tmp/mpich.test" ./comm/mpi
for n in 1 2 4; do
  echo "--- mpiexec.mpich -n $n"
  timeout 900 mpiexec.mpich -n "$n" "$tmp/mpich.test" -test.v -test.count=1 -test.run 'Conformance|TestImport|TestLocalSizeAndProcs|TestDevice|TestReduceInPlaceAtLastRank|TestSmallMessagesStaged|TestWaitAllBlockingAndPolling' >"$tmp/mpich.$n" 2>&1 || { cat "$tmp/mpich.$n"; echo "FAIL: conformance on MPICH, -n $n" >&2; exit 1; }
  passed=$(grep -c -- '--- PASS' "$tmp/mpich.$n" || true)
  if [ "$passed" -eq 0 ] || grep -q -- '--- FAIL' "$tmp/mpich.$n"; then cat "$tmp/mpich.$n"; echo "FAIL: conformance on MPICH, -n $n" >&2; exit 1; fi
  echo "$passed subtests passed (summed over ranks)"
done
# pzrun built against MPICH starts its own jobs with mpiexec.mpich (which
# leave nothing allocated at MPI_Finalize), and its
# C peer is compiled and run on MPICH.
go test -tags mpi,mpich -count=1 -run '^(TestBenchCommMPIWithPeer|TestMPIFinalizeLeavesNothingAllocated)$' ./cmd/pzrun

log "distributed Cholesky across network namespaces over TCP (scripts/netns-cholesky.sh)"
if [ "$(id -u)" = 0 ] && ip netns list >/dev/null 2>&1; then
  scripts/netns-cholesky.sh
else
  echo "skipped: needs root and network namespaces (run: sudo scripts/netns-cholesky.sh)"
fi

log "go test -tags cblas (OpenBLAS kernels)"
go test -tags cblas -count=1 ./internal/linalg/...

log "examples on both backends"
# The static-schedule example (examples/stm) is a master and client
# processes, not a program of ranks: it runs on its own below.
ranked=$(go list ./examples/... | grep -v /examples/stm)
go build -o "$tmp/ex-local/" $ranked
go build -tags mpi -o "$tmp/ex-mpi/" $ranked
for ex in "$tmp"/ex-local/*; do
  name=$(basename "$ex")
  echo "--- $name: embedded backend, 4 in-process ranks"
  PZ_RANKS=4 "$ex"
  echo "--- $name: MPI backend, mpirun -n 2"
  "${MPIRUN[@]}" -n 2 "$tmp/ex-mpi/$name"
done

log "static schedule example: a master and two client processes"
examples/stm/run.sh

echo
echo "all tests passed"
