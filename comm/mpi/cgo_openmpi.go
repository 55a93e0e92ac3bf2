//go:build mpi && !mpich

package mpi

// Open MPI (Debian's libopenmpi-dev), the default MPI of the mpi tag.

// #cgo pkg-config: ompi
import "C"
