// Package local is pz's embedded communication backend: N ranks as
// goroutines of one process, exchanging data through shared memory. It is
// the default when a program is not launched by mpirun, and the fastest
// path on one machine.
//
//	err := local.Run(ctx, 4, func(ctx context.Context, c comm.Comm) error {
//		sum, err := comm.AllReduce(ctx, c, []float64{float64(c.Rank())}, comm.Sum)
//		...
//	})
//
// # How a collective works
//
// Each communicator has one slot per rank. A rank writes its arguments (a
// Fingerprint, buffer pointers) into its slot and then the collective's
// sequence number; once every slot shows it, all ranks compare the fingerprints (a mismatch or an invalid argument anywhere
// gives every rank the same *comm.MismatchError, named after the call that
// rank made, or *comm.ArgError) and then
// move data by reading each other's buffers directly:
//
//   - up to 4 KiB a rank copies its contribution into its slot before
//     arriving (an "eager" copy) and never waits for the others to read it;
//     one synchronization per call;
//   - above, the ranks first commit (past that point a context ending no
//     longer abandons the call), and then share the data phase: the work is
//     cut into chunks of 16-32 KiB in one queue per rank, and each rank
//     takes chunks of its own queue first, then whatever is left in the
//     others'. Peers' buffers are read and written in place, so data is
//     copied once, and every rank waits until every chunk is done. When a
//     rank is not running (more ranks than cores, a busy machine), the
//     ranks that run do its share instead of waiting for it;
//   - Bcast, Gather and AllGather read each piece of a source once and
//     write it to every destination while it is in L1 (a rank's queue is
//     its own contribution, or a part of root's buffer); AllReduce and
//     Reduce fold a cache-line-aligned chunk of all send buffers block by
//     block and write the result to every destination.
//
// A group with more ranks than GOMAXPROCS, or with 32 ranks or more,
// arrives through one counter instead: each rank publishes its slot and
// adds itself to the count, and the last to arrive checks the
// fingerprints for all, makes the result of a small AllReduce or
// AllGather once, and releases the others, waking each parked rank once.
// Watching every slot costs each rank O(n) per collective, and every
// arrival wakes every parked rank to re-check: fine for a few ranks with
// a core each, but an 8-byte AllReduce over 1,024 ranks took 13 ms that
// way and takes 0.24 ms counted; the cost per rank stays flat (~0.2-0.3
// µs on 2 cores) from 4 to 1,024 ranks (BenchmarkRankScaling), so a
// large layout can be rehearsed on a laptop.
//
// Waiting spins briefly, then yields, then parks on a channel, so ranks
// neither add wake-up latency to fast collectives nor burn cores when more
// ranks than cores run. No goroutine is started per call.
//
// # Failures
//
// A context that ends while a rank waits for the others abandons the
// collective: that rank gets an error naming the ranks that had not arrived,
// and the communicator is broken, so the others get comm.ErrBroken instead
// of waiting forever. Once every rank has arrived the collective completes
// regardless, because peers may be reading the caller's memory. Run turns a
// failing or panicking rank into a *comm.RankError (returned together as a
// comm.RankErrors, whose message names alike ranks once), cancels the others'
// context and breaks the world. Abort breaks the world with comm.ErrAborted.
//
// A rank whose function returned (under Run) has left: collectives that
// need it, receives and probes from it that no queued message matches
// (any-source ones once every other rank has left), and sends that wait
// for it (a Send above 4 KiB, Ssend) fail at once with comm.ErrBroken
// naming it; a send of up to 4 KiB to it is buffered and succeeds, as a
// buffered MPI send would. A user reduction that panics (or calls
// runtime.Goexit) while the ranks share the data phase of a large
// collective stops it: that rank closes the work queues, waits until the
// chunks the others are running are done (they must not write its
// buffers once it unwinds), breaks the communicator and panics on; the
// others return comm.ErrBroken naming it and its op.
//
// Point-to-point messages up to 4 KiB are copied and Send returns at once;
// larger ones are copied once, by the receiver, straight from the sender's
// buffer.
//
// # Performance
//
// go test -run '^$' -bench . ./comm/local/ has a benchmark per collective
// at 8 B, 1 KiB, 64 KiB, 1 MiB and 16 MiB for 2 and 4 ranks, and
// `pzrun -n N bench comm` compares AllReduce (float64 sums), AllGather and
// Bcast with Open MPI 4.1 over shared memory (../shared/peers/mpi) in the
// same invocation. Medians of 4 runs of `pzrun -n 2 bench comm -scale 0.5`
// on a 2-core AMD EPYC VM shared with other work, in µs, local / C MPI:
//
//	size     AllReduce     AllGather     Bcast
//	8 B      0.26 / 0.21   0.28 / 0.21   0.24 / 0.29
//	1 KiB    0.32 / 0.43   0.33 / 0.37   0.25 / 0.32
//	64 KiB   1.5 / 5.8     2.2 / 3.5     0.95 / 2.1
//	1 MiB    24 / 92       39 / 70       9.9 / 22
//	16 MiB   1067 / 3273   2041 / 3044   273 / 612
//
// The figures move with the load of the machine: when other processes
// keep the cores busy, both ranks tend to run on one P and take turns
// (about 0.4 µs for a small collective), while Open MPI's busy polling
// slows to about 1.2 µs at 1 KiB. With more ranks than cores the yielding
// wait and the shared data phase keep the local backend usable where MPI's
// busy polling is not: 4 ranks on 2 cores, 1 MiB AllGather took 0.20 ms
// here against Open MPI's 0.82 ms, 1 MiB AllReduce 0.066 ms against
// 0.55 ms.
//
// Sums, products, bitwise ops and integer Min/Max use AVX2 kernels (see
// comm.ReduceInto).
package local
