package mpi_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
)

// Example starts MPI when the binary has it (a singleton world outside
// mpirun) and sums every rank's number; without -tags mpi, Init says how
// to rebuild. Both builds print true only when that works.
func Example() {
	ctx := context.Background()
	w, err := mpi.Init(ctx)
	if !mpi.Available() {
		fmt.Println(errors.Is(err, mpi.ErrNotBuilt))
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Finalize()
	// Rank r contributes r+1: the sum over n ranks is n(n+1)/2.
	sum, err := comm.AllReduce(ctx, comm.Comm(w), []int64{int64(w.Rank() + 1)}, comm.Sum)
	if err != nil {
		fmt.Println(err)
		return
	}
	n := int64(w.Size())
	fmt.Println(sum[0] == n*(n+1)/2)
	// Output: true
}
