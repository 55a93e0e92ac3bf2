// Package dist runs one task graph across the ranks of a communicator, in
// the manner of StarPU-MPI: every rank registers the same data and submits
// the same sequence of tasks; each task runs on one rank, and the data it
// needs moves between ranks by itself.
//
//	ls, _ := scheduler.New(ctx)                    // this rank's workers
//	d, _ := dist.New(ctx, c, ls)                   // collective: every rank
//	A, _ := dist.RegisterTiles(d, nt, nt, b, b, dist.BlockCyclic2D(p, q), fill)
//	for k := range nt {
//		d.Submit(ctx, potrf, dist.RW(A[k][k]))     // runs on the owner of A[k][k]
//		for i := k + 1; i < nt; i++ {
//			d.Submit(ctx, trsm, dist.R(A[k][k]), dist.RW(A[i][k]))
//		}
//		...
//	}
//	err := d.WaitAll(ctx)                          // every rank; owners then hold the result
//
// # Data
//
// A Handle (Register, RegisterTiles) is a contiguous vector or row-major
// matrix of numbers with an owner rank, whose memory holds it, and an
// identity - its registration index - that is the same on every rank.
// Distributions place tiles: BlockCyclic2D (ScaLAPACK's, with Grid to
// choose P x Q), Cyclic1D, or any function (Func). RegisterTiles names
// tile (i, j) "(i,j)", or "A(i,j)" with scheduler.Named("A"), in errors,
// stall reports and traces; RegisterMatrixTiles cuts a rows x cols
// matrix that is not a multiple of the tile shape as ScaLAPACK does (the
// last row and column of tiles hold what is left), the layout
// ScatterMatrix and GatherMatrix move between a root's RAM and the
// owners.
//
// Handles, and the copies other ranks cache of them, live until Close
// unless the program releases them: Scheduler.Unregister (StarPU-MPI's
// starpu_data_unregister) brings a handle's latest version back to its
// owner, returns the owner's data there, drops every other rank's copy
// and forgets the handle, whose number is never reused; Scheduler.Flush
// (starpu_mpi_cache_flush) drops only the cached copies, so that the next
// reader elsewhere receives the data again. Both are collective, like
// Submit: every rank calls them at the same point of its submissions,
// and the graph check compares them as submissions. A long iterative
// program registers and unregisters its temporaries without growing.
//
// # Where tasks run, and what moves
//
// A task runs on the rank OnRank names, else on the owner of the first
// handle it writes (owner computes), else on the owner of its first
// handle. Every rank walks the same submission sequence and so knows, for
// every handle, which rank wrote its latest version and which ranks hold
// it. When a task reads a version its rank does not hold, the rank that
// wrote it sends it: a detached task (scheduler.Codelet.Detached) holds the
// data readable on the sender until the non-blocking send completes, and
// one holds the copy writable on the receiver until the receive completes,
// so that no worker waits on the network and dependencies stay those of
// the node-local scheduler. A version goes to a rank at most once; a
// cached copy is replaced when a newer version is needed. One progress
// goroutine per rank drives the requests. Transfers run on a duplicate of
// the communicator, so they never match the application's messages; on
// in-process ranks they are memory copies, under MPI messages.
//
// WaitAll brings each handle's latest version back to its owner, waits for
// this rank's tasks and transfers, and agrees with the other ranks on the
// outcome.
//
// The ranks that read a version keep cached copies of it, and only the
// submission walk tells them of a newer one: a host write through
// Handle.Data after WaitAll reaches this rank's later tasks only. To
// change data between graphs, write it in a task, or call Update (on
// every rank at the same point, like Submit), which runs a function of
// the data on its owner as such a task.
//
// # Master/worker mode
//
// RunMaster runs a graph submitted on one rank on the cores of every rank:
// the master's scheduler has a proxy worker per remote core, which sends
// the task by codelet name (Registry) with its data and gets the written
// data back.
//
// # Failures
//
// A task that fails on one rank is announced to the others, whose receives
// of data it would have produced fail at once instead of waiting for ever;
// WaitAll returns, on every rank, an error naming the rank and the task,
// by its submission's number and data (ErrRankFailed: 'rank 1: task
// "gemm" of submission #21: R("A(2,0)") R("A(0,1)") RW("A(2,1)"): ...').
// A failed distributed scheduler stays failed: later
// Submit calls return the failure. To go on, every rank closes it and
// calls New at the same point (on the same communicator and local
// scheduler), and registers its data again: the new scheduler refuses
// the failed one's handles (ErrForeignHandle).
//
// A failure cancels the receives still posted (comm.Canceler), and each
// receive's task ends only once its request has (canceled, or filled
// whole by a message it had matched): a message that comes later is not
// received, so no buffer, an owner's registered slice included, changes
// after WaitAll or Close returned. Sends in flight end at once, as their
// peers may have canceled the receives.
//
// With several ranks, a WaitAll that returns early on one rank (its
// context ends, or WithStallTimeout passes with nothing completing) tells
// the others, whose WaitAll returns ErrRankFailed naming it at once
// instead of waiting for it; the graph has then failed on every rank, the
// leaving one included, and a later WaitAll there returns the failure.
// (On one rank WaitAll may be called again, as the node-local
// scheduler's.) The leaving rank also tells how far it got in the
// comparison of the ranks' graphs: a comparison it never started (nor
// the exchange of submissions that follows one that found the graphs
// apart) ends at once on the others, or is not started there, also while
// the leaving rank lives on without closing; one it started completes, as
// ending the others' wait would leave its collective unmatched (under
// MPI, for MPI_Finalize to wait for). The outcome's agreement at the end
// of WaitAll is bounded by the stall timeout too, so a rank that never
// comes to it cannot hang the others.
//
// Close does not lose work: with tasks submitted since WaitAll last
// returned nil it first waits for them as WaitAll does (every rank closes
// at the same point, as the runtime view's Close does); after a failure
// it ends the transfers in flight, waits for this rank's tasks to drain
// and does not report their errors again.
//
// # Access modes
//
// R, W, RW, Commute, Scratch and Redux are supported. Commute tasks on
// different ranks run in submission order. Redux (after SetReduction)
// lets tasks on any ranks accumulate into one handle at once: on the rank
// holding its latest version they accumulate into it (through the local
// scheduler's per-worker copies), elsewhere into that rank's partial
// result, started from the identity; before the handle is next read or
// written, or at WaitAll, the partial results are sent to that rank and
// combined there, in rank order.
package dist
