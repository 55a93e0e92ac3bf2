package mpi_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/pzgo/pz/comm/mpi"
)

// Example shows the start of a program that uses MPI when the binary has
// it. Without -tags mpi, Init says how to rebuild.
func Example() {
	if !mpi.Available() {
		_, err := mpi.Init(context.Background())
		fmt.Println(errors.Is(err, mpi.ErrNotBuilt))
		return
	}
	fmt.Println(true) // the same line in both builds, for the Output check
	// Under mpirun:
	//   w, err := mpi.Init(ctx)
	//   defer w.Finalize()
	//   sum, err := comm.AllReduce(ctx, w, local, comm.Sum)

	// Output: true
}
