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
// Each communicator has one slot per rank and an arrival counter. A rank
// writes its arguments (a Fingerprint, buffer pointers) into its slot and
// increments the counter; once the counter shows every rank, all ranks
// compare the fingerprints (a mismatch or an invalid argument anywhere
// gives every rank the same *comm.MismatchError or *comm.ArgError) and then
// move data by reading each other's buffers directly:
//
//   - up to 4 KiB a rank copies its contribution into its slot before
//     arriving (an "eager" copy) and never waits for the others to read it;
//     one synchronization per call;
//   - above, peers read the caller's buffers in place, so data is copied
//     once, and the owner waits until they are done;
//   - AllReduce and Reduce on large buffers split the work: each rank folds
//     a disjoint, cache-line-aligned chunk of all send buffers, block by
//     block, and writes the result to every destination.
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
// failing or panicking rank into a *comm.RankError, cancels the others'
// context and breaks the world. Abort breaks the world with comm.ErrAborted.
//
// Point-to-point messages up to 4 KiB are copied and Send returns at once;
// larger ones are copied once, by the receiver, straight from the sender's
// buffer.
package local
