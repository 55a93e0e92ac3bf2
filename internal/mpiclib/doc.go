// Package mpiclib plays a C library for the tests of comm/mpi and
// runtimeview (build tag mpi): it makes communicators in C and
// communicates on handles given to it, as a C or Fortran MPI library linked
// into a Go program would. Without the tag it is empty.
package mpiclib
