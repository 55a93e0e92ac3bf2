//go:build mpi

package dist_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/internal/launch"
)

// BenchmarkMPIMaster is BenchmarkMaster under mpirun, on 2 or more ranks
// (rank 0 the master, rank 1 the worker rank the tasks go to; other
// ranks only serve). It initializes MPI once, so one mpirun runs it once
// (no -test.count above 1):
//
//	go test -tags mpi -c -o /tmp/dist.test ./scheduler/dist
//	mpirun -n 2 /tmp/dist.test -test.run '^$' -test.bench '^BenchmarkMPIMaster$' -test.benchmem
//
// Outside mpirun it is skipped.
func BenchmarkMPIMaster(b *testing.B) {
	benchUnderMPI(b, "BenchmarkMPIMaster", benchMasterRanks)
}

// benchUnderMPI runs bench (the benchmark named name) on every rank of
// an mpirun job of 2 ranks or more, MPI initialized for it and finalized
// after it, under a 10-minute context; outside mpirun, or on 1 rank, it
// skips b.
func benchUnderMPI(b *testing.B, name string, bench func(context.Context, *testing.B, comm.Comm) error) {
	b.Helper()
	if !launch.Detect(os.Getenv).Launched() {
		b.Skip("run under mpirun: see " + name + "'s doc")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	w, err := mpi.Init(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := w.Finalize(); err != nil {
			b.Error(err)
		}
	}()
	if w.Size() < 2 {
		b.Skip(name + " needs 2 ranks or more")
	}
	if err := bench(ctx, b, w); err != nil {
		b.Fatal(err)
	}
}
