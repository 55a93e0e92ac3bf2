#!/usr/bin/env bash
# run.sh - the measurements that need the lent device machine (an NVIDIA
# GPU, 16 cores), in one short run of the prepared binaries of
# scripts/device/build.sh, most important first, each under its own time
# limit, so that whatever the session's device time allows comes back:
#
#   run(command="scripts/device/run.sh", carry=["build/device"], timeout_s=540)
#
# Everything goes under $OUT (default ./out/device): STEP.out for each
# step's output, steps.jsonl with one line per step
# {"step","rc","seconds"}, and summary.txt. STEPS (space-separated step
# names, default all) picks some; BUDGET (seconds, default 480) stops
# starting steps once it is spent. A step whose binary is not in the
# archive (build.sh had no ../shared/peers, no ScaLAPACK) is skipped, with
# a line saying so. Dry run on a machine without a GPU: the GPU steps
# report their skips and the rest runs at the sizes given by SMALL=1.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-$(pwd)/out/device}
mkdir -p "$OUT"
BUDGET=${BUDGET:-480}
archive=build/device/pz-device.tar.xz
[ -f "$archive" ] || { echo "run.sh: $archive missing: run scripts/device/build.sh first" >&2; exit 2; }
bin=$(mktemp -d)
tar -C "$bin" -xJf "$archive"
export LD_LIBRARY_PATH="$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export PZ_PERFMODEL_DIR="$bin/perfmodels"
start=$SECONDS
ncores=$(nproc)

# Sizes: the GPU ones fill an H100 for a few seconds; SMALL=1 (dry runs)
# shrinks everything. Out of core: the factorization touches only the
# lower triangle's t(t+1)/2 tiles (t = OOCN/OOCB) of OOCB^2 doubles, and
# OOCMEM is 1/1.5 of those (with a cap above them nothing is evicted: 21 MiB
# at the small size evicted nothing); one tile must fit many times over.
if [ "${SMALL:-0}" = 1 ]; then
  # 36 tiles of 256^2 doubles (512 KiB) are 18 MiB; 12 MiB is 1/1.5 of that.
  GN=2048 GB=512 GEMMN=2048 GEMMB=512 OOCN=2048 OOCB=256 OOCMEM=12MiB CN=1024 CB=128 FRAMES=500 TASKS=20000
else
  # 136 tiles of 2048^2 doubles (32 MiB) are 4352 MiB; 2901 MiB is 1/1.5 of that.
  GN=16384 GB=1024 GEMMN=16384 GEMMB=2048 OOCN=32768 OOCB=2048 OOCMEM=2901MiB CN=16384 CB=256 FRAMES=10000 TASKS=100000
fi

step() { # step NAME TIMEOUT CMD... : run CMD, output to $OUT/NAME.out
  local name=$1 limit=$2
  shift 2
  if [ -n "${STEPS:-}" ] && [[ " $STEPS " != *" $name "* ]]; then return; fi
  local left=$((BUDGET - (SECONDS - start)))
  if ((left < 10)); then
    echo "{\"step\":\"$name\",\"rc\":null,\"skipped\":\"budget spent\"}" >>"$OUT/steps.jsonl"
    return
  fi
  ((limit > left)) && limit=$left
  local a
  for a in "$@"; do # a binary of the archive that build.sh could not make
    if [[ $a == "$bin"/* && ! -e $a ]]; then
      echo "== $name skipped: ${a#"$bin"/} is not in $archive (build.sh could not build it, and said why)" | tee -a "$OUT/summary.txt"
      echo "{\"step\":\"$name\",\"rc\":null,\"skipped\":\"${a#"$bin"/} not built\"}" >>"$OUT/steps.jsonl"
      return
    fi
  done
  local t0=$SECONDS
  echo "== $name (limit ${limit}s): $*" | tee -a "$OUT/summary.txt"
  timeout -k 5 "$limit" "$@" >"$OUT/$name.out" 2>&1
  local rc=$?
  echo "{\"step\":\"$name\",\"rc\":$rc,\"seconds\":$((SECONDS - t0))}" >>"$OUT/steps.jsonl"
  tail -n 3 "$OUT/$name.out" | sed 's/^/   /' | tee -a "$OUT/summary.txt"
}

echo "commit $(cat "$bin/COMMIT") on $(hostname), $ncores cores" | tee "$OUT/summary.txt"
step machine 30 sh -c 'nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv; "$0/pzrun" info --json' "$bin"

# Issue 12 and 13: correctness on the real driver, then the GPU figures.
step gpu-tests 120 bash -c 'set -o pipefail
  cd "$0" && for t in hardware_cuda hardware_nvml hardware scheduler scheduler_static; do
    case $t in
      scheduler) run="TestCUDARealGPU" ;;
      scheduler_static) run="TestCUDAStreamPipeline\$" ;;
      hardware) run="TestRealMachine" ;;
      hardware_nvml) run="TestRealGPUs" ;;
      *) run="TestDevicesMatchNvidiaSMI|TestMemInfoAndAlloc|TestVectorAddPTX|TestLoadBadPTXReturnsLog|TestSynchronizeHonoursContext|TestConcurrentUse|TestClosedContext" ;;
    esac
    echo "--- $t -test.run $run"; ./$t.test -test.run "$run" -test.v -test.count=1 2>&1 | grep -E "^(=== RUN|--- |PASS|FAIL|ok)|skip" || exit 1
  done' "$bin"
step copy-bandwidth 60 "$bin/hardware_cuda.test" -test.run '^$' -test.bench 'CopyPinned|CopyPageable' -test.benchtime 20x
step cholesky-vs-one-call 90 "$bin/pzrun" cholesky -n $GN -b $GB -precision 64 -cuda 1 -device-only -cuda-reference -warmup 1 --json
step gemm-vs-one-call 90 "$bin/pzrun" gemm -n $GEMMN -b $GEMMB -precision 64 -cuda 1 -cuda-reference -warmup 1 --json
step cholesky-hybrid 60 "$bin/pzrun-cblas" cholesky -n $GN -b $GB -precision 64 -cuda 1 -warmup 1 --json
step cholesky-gpu-only 60 "$bin/pzrun-cblas" cholesky -n $GN -b $GB -precision 64 -cuda 1 -device-only -warmup 1 --json
step cholesky-pageable 60 "$bin/pzrun" cholesky -n $GN -b $GB -precision 64 -cuda 1 -device-only -pageable -warmup 1 --json
step cholesky-pipeline1 60 env PZ_CUDA_PIPELINE=1 "$bin/pzrun" cholesky -n $GN -b $GB -precision 64 -cuda 1 -device-only -warmup 1 --json
step cholesky-in-core 90 "$bin/pzrun" cholesky -n $OOCN -b $OOCB -precision 64 -cuda 1 -device-only --json
step cholesky-out-of-core 120 "$bin/pzrun" cholesky -n $OOCN -b $OOCB -precision 64 -cuda 1 -device-only -cuda-mem $OOCMEM --json

# Issue 11: 4 ranks x 4 cores against ScaLAPACK on 16 processes, and in process.
step scalapack-16 60 mpirun -n "$ncores" --bind-to core "$bin/pdpotrf_bench" -n $CN -nb $CB -r 3
bind4=(--map-by "slot:PE=$((ncores / 4))" --bind-to core) # 4 ranks x a quarter of the cores each
((ncores >= 4)) || bind4=()
step dist-cholesky-mpi 90 mpirun -n 4 "${bind4[@]}" "$bin/pzrun-mpi" cholesky -n $CN -b $CB -precision 64 -warmup 1 --json
step dist-cholesky-inproc 90 "$bin/pzrun-cblas" -n 4 cholesky -n $CN -b $CB -precision 64 -warmup 1 --json
step cholesky-16cores 60 "$bin/pzrun-cblas" cholesky -n $CN -b $CB -precision 64 -warmup 1 --json

# Issue 13: the static schedule on the cores, beside cyclictest.
step stm-bench 60 env PATH="$bin:$PATH" "$bin/pzrun" stm bench -cores "$ncores" -clients 4 -frames $FRAMES -json

# Issue 9: per-task cost on every core (no OpenMP or StarPU peer there).
step bench-tasks 90 "$bin/pzrun" bench tasks -cases indep,chain,handles4 -policies lws,eager,dmda -submitters 1 -tasks $TASKS -rounds 5 -openmp=false -starpu=false -format table

# Issue 10: collectives on 16 MPI ranks, pz and the C peer.
step collbench-16 60 mpirun -n "$ncores" --bind-to core "$bin/collbench" 0.5 multiple
step bench-comm-16 90 "$bin/pzrun-mpi" bench comm -backend mpi -ranks "$ncores" -sizes 8,1024,65536,1048576 -scale 0.5 -peer ''

echo "done in $((SECONDS - start)) s; results in $OUT" | tee -a "$OUT/summary.txt"
