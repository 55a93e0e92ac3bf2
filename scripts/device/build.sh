#!/usr/bin/env bash
# build.sh - build, on this machine, what scripts/device/run.sh runs on a
# lent device machine (an NVIDIA GPU and 16 cores, OpenMPI, no Go
# toolchain, no compiler assumed), and pack it into one archive:
#
#   scripts/device/build.sh            # -> build/device/pz-device.tar.xz (~20 MB)
#
# then, with the device tool: run(command="scripts/device/run.sh",
# carry=["build/device"], timeout_s=540). The archive holds:
#   pzrun          CGO_ENABLED=0 (GPUs through the driver at run time)
#   pzrun-cblas    -tags cblas (OpenBLAS tile kernels, for the hybrid and 16-core runs)
#   pzrun-mpi      -tags mpi,cblas against this machine's Open MPI (runs under the device's mpirun)
#   *.test         the packages whose tests need a real GPU
#   pdpotrf_bench, collbench   the ScaLAPACK and C MPI peers (../shared/peers)
#   cyclictest     for pzrun stm bench
#   lib/           the serial OpenBLAS, ScaLAPACK and gfortran libraries they load
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$(pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib" build/device
flags=(-trimpath -ldflags='-s -w')
CGO_ENABLED=0 go build "${flags[@]}" -o "$stage/pzrun" ./cmd/pzrun
go build "${flags[@]}" -tags cblas -o "$stage/pzrun-cblas" ./cmd/pzrun
go build "${flags[@]}" -tags mpi,cblas -o "$stage/pzrun-mpi" ./cmd/pzrun
for p in hardware hardware/cuda hardware/nvml scheduler scheduler/static; do
  go test -c "${flags[@]}" -o "$stage/$(echo "$p" | tr / _).test" "./$p"
done
# The C peers are optional: without one, run.sh skips its step (and says so).
peers=$root/../shared/peers
if [ ! -f "$peers/dist-cholesky/pdpotrf_bench.c" ]; then
  echo "build.sh: no ScaLAPACK peer ($peers/dist-cholesky/pdpotrf_bench.c missing): run.sh will skip scalapack-16" >&2
elif ! pkg-config --exists scalapack-openmpi; then
  echo "build.sh: no ScaLAPACK peer (install libscalapack-openmpi-dev): run.sh will skip scalapack-16" >&2
else
  mpicc -O2 "$peers/dist-cholesky/pdpotrf_bench.c" -o "$stage/pdpotrf_bench" \
    $(pkg-config --libs scalapack-openmpi) -lopenblas -lgfortran -lm
  cp -L /usr/lib/x86_64-linux-gnu/libscalapack-openmpi.so.2.2 "$stage/lib/"
fi
if [ -f "$peers/mpi/collbench.c" ]; then
  mpicc -O2 "$peers/mpi/collbench.c" -o "$stage/collbench"
else
  echo "build.sh: no C MPI peer ($peers/mpi/collbench.c missing): run.sh will skip collbench-16" >&2
fi
blas=/usr/lib/x86_64-linux-gnu/openblas-serial
if [ -e "$blas/libopenblas.so.0" ]; then
  cp -L "$blas/libopenblas.so.0" "$stage/lib/"
  ln -s libopenblas.so.0 "$stage/lib/libblas.so.3"
  ln -s libopenblas.so.0 "$stage/lib/liblapack.so.3"
else
  echo "build.sh: no serial OpenBLAS (install libopenblas0-serial)" >&2
fi
for l in libgfortran.so.5 libquadmath.so.0; do
  [ -e "/usr/lib/x86_64-linux-gnu/$l" ] && cp -L "/usr/lib/x86_64-linux-gnu/$l" "$stage/lib/"
done
if command -v cyclictest >/dev/null; then
  cp "$(command -v cyclictest)" "$stage/"
else
  echo "build.sh: no cyclictest (install rt-tests): stm-bench will run without its peer" >&2
fi
git rev-parse --short HEAD >"$stage/COMMIT"
tar -C "$stage" -cJf build/device/pz-device.tar.xz .
ls -la build/device/pz-device.tar.xz
