//go:build mpi && mpich

package mpiclib

// MPICH (Debian's libmpich-dev): build with -tags mpi,mpich.

// #cgo pkg-config: mpich
import "C"
