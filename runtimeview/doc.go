// Package runtimeview is the top-level view of a parallel pz program: the
// ranks, every rank's resource set, the collectives among them, a stack of
// finalizers and a logger. It follows ParallelZone's RuntimeView.
//
// # Starting
//
// A program makes one RuntimeView per process with New and closes it at the
// end:
//
//	rt, err := runtimeview.New(ctx)  // MPI world under mpirun; one rank otherwise
//	if err != nil { ... }
//	defer rt.Close()
//
// Built with -tags mpi, New initializes MPI if nobody has (and Close
// finalizes it), or adopts an MPI that the embedding program initialized
// (and leaves it running). WithComm adopts any communicator, such as a
// sub-communicator from Split. Built without MPI, New runs one rank on the
// embedded backend, and refuses, with a message saying how to rebuild, to
// run as N copies of rank 0 when mpirun started it with several ranks.
//
// RunLocal runs n ranks inside one process (comm/local) and needs no MPI at
// all:
//
//	err := runtimeview.RunLocal(ctx, 4, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
//		sum, err := runtimeview.AllReduce(ctx, rt, []float64{x}, comm.Sum)
//		...
//	})
//
// New and RunLocal are collective: each rank discovers its machine (package
// hardware) and the ranks exchange the descriptions once, so every rank's
// ResourceSet is available on every rank without further communication.
// The exchange happens there, where every rank is known to take part: done
// lazily on first use, it would hang a program that inspects the other
// ranks' resource sets on the root only.
//
// # Ranks, resource sets and roots
//
// Size and Rank number the ranks; ResourceSet(i) describes rank i (its RAM,
// GPUs, CPU cores and host) and is the root of rooted collectives (package
// resourceset): resourceset.Gather(ctx, rt.ResourceSet(2).RAM(), mine)
// gathers to rank 2. The all-to-all collectives are the generic functions
// AllGather and AllReduce (numeric slices, moved as raw memory) and
// AllGatherValues and AllReduceValue (any value, through comm's codec), plus
// Barrier. Comm gives the communicator itself for everything else in
// package comm.
//
// # Finalizers and signals
//
// StackCallback pushes a teardown function; Close runs them last pushed
// first, each exactly once even when others fail or panic, and then pz's
// own teardown: MPI_Finalize when New initialized MPI, then the logger.
// Close is idempotent and leaves no goroutine behind. By default New and
// Run also handle SIGINT and SIGTERM: the first one cancels the context
// of Run's function and waits for it to return, runs Close and exits with
// the conventional status 128+signo (130, 143); a second one, 0.1 s or
// more after the first (sooner, it is the same interrupt sent to the
// process group and relayed by a launcher), ends the process at once with
// its status. Under MPI with several ranks the signaled rank runs its
// callbacks without MPI_Finalize and ends the job with MPI_Abort (see
// WithSignals).
//
// # Logging
//
// Logger prints on the root rank only (rank 0) and puts the rank in every
// line; MyResourceSet().Logger() prints on every rank. Both follow the
// PZ_LOG, PZ_LOG_RANKS, PZ_LOG_FORMAT and PZ_LOG_FILE environment variables
// and WithLogOptions (see package logger).
package runtimeview
