// Package commtest is the conformance suite for comm backends: one list of
// cases that every implementation of comm.Comm must pass, for any number
// of ranks from 1 up.
//
// An in-process backend runs each case on a fresh group of ranks:
//
//	func TestConformance(t *testing.T) {
//		for n := 1; n <= 4; n++ {
//			t.Run(fmt.Sprint(n), func(t *testing.T) { commtest.RunGroup(t, n, local.Run) })
//		}
//	}
//
// A one-process-per-rank backend (MPI) calls RunWorld from a test in every
// process, with the world communicator; the ranks run the same subtests in
// the same order and agree on each outcome, so all fail together:
//
//	func TestConformance(t *testing.T) { commtest.RunWorld(t, world) }
//	// go test -c -tags mpi && mpirun -n 4 ./pkg.test
//
// The cases cover every collective with every op and every numeric type
// (including int, uint, uintptr and named types), several roots, empty and
// 16 MiB buffers, variable lengths, Split and collectives on the new
// communicators, point-to-point ordering with tags and AnySource
// (non-overtaking across message sizes and posted wildcard receives),
// probes, zero-length messages, sends to the rank itself, request sets
// (empty, with completed requests, a failing request, an ended context),
// non-blocking overlap, cancellation of receives, truncation, encoded values, and misuse that must give
// an error on every rank. Expected results are computed in the test from
// rank numbers, never by calling the backend again.
package commtest
