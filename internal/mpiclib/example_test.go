//go:build mpi

package mpiclib_test

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/internal/mpiclib"
)

// A C library and pz share communicators: the library splits the world
// (even and odd world ranks, in reverse order) and sums on its own
// communicator, by C and by Fortran handle, and on pz's world; pz imports
// the library's communicator and finds the same ranks. Each line compares
// what the C library computed with what the ranks' numbers give, so the
// output is the same on every rank: under `go test -tags mpi` a singleton
// world, under `mpirun -n 4` four ranks.
func Example() {
	ctx := context.Background()
	w, err := mpi.Init(ctx) // MPI_Init_thread; MPI as a singleton outside mpirun
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Finalize()
	me, n := w.Rank(), w.Size()

	h, crank, csize, err := mpiclib.Split(2)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Members: world ranks me%2, me%2+2, ...; the highest is rank 0.
	members := (n - me%2 + 1) / 2
	fmt.Println("split:", csize == members, crank == members-1-me/2)

	// Sum of the members' world ranks, computed by the C library.
	want := 0
	for r := me % 2; r < n; r += 2 {
		want += r
	}
	s, err := mpiclib.Sum(h, me)
	fmt.Println("library sum:", s == want, err)
	s, err = mpiclib.SumFortran(mpiclib.Fortran(h), me+1)
	fmt.Println("by Fortran handle:", s == want+csize, err)

	// The library's communicator in pz: same rank, same sum.
	c, err := w.Import(ctx, h)
	if err != nil {
		fmt.Println(err)
		return
	}
	got, err := comm.AllReduce(ctx, comm.Comm(c), []int64{int64(me)}, comm.Sum)
	fmt.Println("in pz:", c.Rank() == crank, err == nil && got[0] == int64(want))

	// pz's world in the library: ranks contribute r+1, n(n+1)/2 in all.
	s, err = mpiclib.Sum(w.Handle(), me+1)
	fmt.Println("world sum:", s == n*(n+1)/2, err)

	// MPI_COMM_NULL is no communicator.
	_, err = w.Import(ctx, mpiclib.Null())
	fmt.Println("null refused:", err != nil)

	fmt.Println("free:", c.Free(), mpiclib.Free(h))
	// Output:
	// split: true true
	// library sum: true <nil>
	// by Fortran handle: true <nil>
	// in pz: true true
	// world sum: true <nil>
	// null refused: true
	// free: <nil> <nil>
}
