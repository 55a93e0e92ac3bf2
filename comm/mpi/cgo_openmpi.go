//go:build mpi && !mpich

package mpi

// Open MPI (Debian's libopenmpi-dev), the default MPI of the mpi tag.

// #cgo pkg-config: ompi
import "C"

// Library names the MPI library this binary is built against, as
// internal/launch names it: "openmpi" here. A job of this binary must be
// started with that library's launcher (mpirun).
func Library() string { return "openmpi" }
