//go:build mpi && mpich

package mpi

// MPICH (Debian's libmpich-dev): build with -tags mpi,mpich.

// #cgo pkg-config: mpich
import "C"

// Library names the MPI library this binary is built against, as
// internal/launch names it: "mpich" here. A job of this binary must be
// started with that library's launcher (mpiexec.mpich).
func Library() string { return "mpich" }
