#!/usr/bin/env bash
# mpitest.sh - build the comm/mpi test binary with -tags mpi and run it
# under mpirun for each rank count; exits non-zero if any rank of any run
# fails (the test binary agrees on its exit status across ranks).
#
#   comm/mpi/mpitest.sh                 # tests at 1, 2 and 4 ranks
#   RANKS="2" comm/mpi/mpitest.sh bench # go test benchmarks, fixed iterations
#   BENCH=AllReduce BENCHTIME=2000x comm/mpi/mpitest.sh bench
#   PZ_COMM_BLOCKING=1 RANKS="2" comm/mpi/mpitest.sh bench # collectives in the blocking form
#   SERIALIZED=1 RANKS="2 4" comm/mpi/mpitest.sh
#
# SERIALIZED=1 runs the tests as a C program embedding pz would: each
# rank initializes MPI itself at MPI_THREAD_SERIALIZED before mpi.Init
# adopts it (PZ_MPI_TEST_SERIALIZED, read by TestMain), so that every MPI
# call is made under one lock and blocking ones are polled. TestLargeCounts
# (GiBs, a minute or more) is skipped then; run it with SKIP=.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
mode="${1:-test}"
RANKS="${RANKS:-1 2 4}"
bin="$(mktemp -d)/mpi.test"
go test -tags mpi -c -o "$bin" ./comm/mpi
flags=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
export OMPI_MCA_pml="${OMPI_MCA_pml:-ob1}" OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader}"
export OMPI_MCA_btl_vader_single_copy_mechanism="${OMPI_MCA_btl_vader_single_copy_mechanism:-none}"
skip=()
if [ "$mode" = bench ]; then
  # The benchmarks call with context.Background; the collectives' form is
  # the World's (doc.go, "# Context"): say which one they measure.
  case "${SERIALIZED:-}/${PZ_COMM_BLOCKING:-}" in
    1/*) mode="bench (collectives: polled, whatever PZ_COMM_BLOCKING)" ;;
    */1|*/true|*/on|*/yes) mode="bench (collectives: blocking, PZ_COMM_BLOCKING=$PZ_COMM_BLOCKING)" ;;
    *) mode="bench (collectives: non-blocking, the default; PZ_COMM_BLOCKING=1 for the blocking form)" ;;
  esac
fi
if [ "${SERIALIZED:-}" = 1 ]; then
  export PZ_MPI_TEST_SERIALIZED=1
  mode="$mode (MPI_THREAD_SERIALIZED)"
  skip=(-test.skip="${SKIP-^TestLargeCounts\$}")
fi
for n in $RANKS; do
  echo "# mpirun -n $n $mode" >&2
  if [ "${mode%% *}" = bench ]; then
    timeout 900 mpirun -n "$n" "${flags[@]}" "$bin" -test.run='^$' \
      -test.bench="${BENCH:-.}" -test.benchtime="${BENCHTIME:-500x}" -test.benchmem
  else
    # TestSpawn is skipped under mpirun; it is what runs mpirun from go test.
    timeout 900 mpirun -n "$n" "${flags[@]}" "$bin" -test.count=1 "${skip[@]}" ${VERBOSE:+-test.v}
  fi
done
