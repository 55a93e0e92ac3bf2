//go:build mpi && mpich

package mpi

// MPICH (Debian's libmpich-dev): build with -tags mpi,mpich.

// #cgo pkg-config: mpich
import "C"
