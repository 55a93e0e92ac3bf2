package mpi

import (
	"errors"
	"fmt"

	"github.com/pzgo/pz/comm"
)

// Errors of package mpi. Use errors.Is.
var (
	// ErrNotBuilt is returned by Init in a binary built without the mpi
	// build tag.
	ErrNotBuilt = errors.New("mpi: this binary was built without MPI support; rebuild with `go build -tags mpi` (needs the MPI development files: `pkg-config --cflags ompi` must work, e.g. Debian's libopenmpi-dev)")
	// ErrFinalized is returned by Init after MPI was finalized: MPI can be
	// initialized only once per process. Every call on a communicator
	// after World.Finalize returns it too, wrapped with comm.ErrFreed,
	// also on an adopted MPI, which Finalize leaves initialized but no
	// longer uses.
	ErrFinalized = errors.New("mpi: MPI was finalized (World.Finalize, or the Close of the RuntimeView that owns it)")
	// ErrUnfinalized is wrapped by the error World.Finalize returns when a
	// non-blocking collective is still inside MPI after Finalize waited
	// for it (another rank never took part in it): MPI then stays
	// initialized, since finalizing it while a thread is inside it is
	// undefined (Open MPI may crash or hang). The process can still exit;
	// mpirun reports that the rank exited without calling MPI_Finalize.
	ErrUnfinalized = errors.New("mpi: MPI left unfinalized")
	// ErrThreadLevel is returned by Init when MPI provides less than
	// MPI_THREAD_SERIALIZED, so Go, which runs goroutines on any OS thread,
	// cannot call it safely.
	ErrThreadLevel = errors.New("mpi: the MPI library provides less than MPI_THREAD_SERIALIZED")
	// ErrMPI is wrapped by every *Error: an MPI call returned an error code.
	ErrMPI = errors.New("mpi: MPI call failed")
	// ErrImportAbandoned is wrapped by the error of an Import on an MPI
	// at MPI_THREAD_SERIALIZED when another rank's Import ended (its
	// context) before every rank had called it: no rank made the
	// duplicate, and every rank may call Import again.
	ErrImportAbandoned = errors.New("mpi: another rank gave up on Import")
	// ErrAbandoned is wrapped, with comm.ErrBroken, by the error of Dup,
	// Split or SplitShared, when run with a ctx that can end or on an MPI
	// at MPI_THREAD_SERIALIZED, on the ranks whose call found that
	// another rank's ended (its context) before every rank had called it:
	// no rank made the MPI call, and the communicator is broken on every
	// rank (the one that gave up too).
	ErrAbandoned = errors.New("mpi: another rank gave up on the collective")
	// ErrOption is wrapped by Init for an invalid option or environment
	// variable (PZ_COMM_REPORT, PZ_COMM_TIMEOUT).
	ErrOption = errors.New("mpi: invalid option")
	// ErrUserOpPanicked is wrapped, with a *comm.RankError naming the
	// rank, by the error ReduceUser and AllReduceUser return on every
	// rank but the one whose user op panicked (which panics with the
	// op's value): MPI finished the reduction without the op's results
	// from there, so no rank's result is valid.
	ErrUserOpPanicked = errors.New("mpi: user op panicked")
)

// Error is an MPI error code turned into a Go error. It wraps ErrMPI and,
// for MPI_ERR_TRUNCATE, comm.ErrTruncated.
type Error struct {
	Call      string // the MPI function, e.g. "MPI_Allreduce"
	Code      int    // the error code it returned
	Class     int    // MPI_Error_class of Code
	Msg       string // MPI_Error_string of Code
	Truncated bool   // Class is MPI_ERR_TRUNCATE
}

// Error names the MPI function, MPI's message and the code and class.
func (e *Error) Error() string {
	return fmt.Sprintf("mpi: %s: %s (error code %d, class %d)", e.Call, e.Msg, e.Code, e.Class)
}

// Unwrap returns ErrMPI, and comm.ErrTruncated when the message did not fit.
func (e *Error) Unwrap() []error {
	if e.Truncated {
		return []error{ErrMPI, comm.ErrTruncated}
	}
	return []error{ErrMPI}
}
