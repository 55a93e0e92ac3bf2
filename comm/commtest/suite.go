package commtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pzgo/pz/comm"
)

// A Case is one conformance check. Run is called on every rank of a
// communicator with that rank's Comm, and returns nil if everything this
// rank observed was right. Cases work for any size from 1 up (they are
// tested for 1 to 4) and leave the communicator usable.
type Case struct {
	Name string
	Run  func(ctx context.Context, c comm.Comm) error
}

// caseTimeout bounds one case; it is generous because the 16 MiB cases
// run under the race detector and under mpirun --oversubscribe.
const caseTimeout = 3 * time.Minute

// Cases returns the conformance cases, in a fixed order.
func Cases() []Case {
	out := []Case{
		{"Barrier", barrierCase},
		{"Empty", emptyCase},
		{"Large", largeCase},
		{"Split", splitCase},
		{"P2P/Ring", ringCase},
		{"P2P/TagOrder", tagOrderCase},
		{"P2P/AnySource", anySourceCase},
		{"P2P/Nonblocking", nonblockingCase},
		{"P2P/Truncated", truncatedCase},
		{"P2P/TruncatedPosted", postedTruncatedCase},
		{"P2P/FreePending", freePendingCase},
		{"Values", valuesCase},
		{"Misuse/Count", misuseCountCase},
		{"Misuse/Call", misuseCallCase},
		{"Misuse/Datatype", misuseTypeCase},
		{"Misuse/Op", misuseOpCase},
		{"Misuse/NilUserOp", misuseNilUserOpCase},
		{"Misuse/Root", misuseRootCase},
		{"Misuse/RootRange", misuseRootRangeCase},
		{"Misuse/Unsupported", misuseUnsupportedCase},
		{"Misuse/Counts", misuseCountsCase},
		{"Misuse/RecvLength", misuseRecvLenCase},
		{"Misuse/Unencodable", misuseUnencodableCase},
		{"Misuse/ValueTypes", valueTypesCase},
		{"Misuse/PointToPoint", misuseP2PCase},
		{"Misuse/Loc", misuseLocCase},
		{"Misuse/Alias", misuseAliasCase},
		{"Misuse/NilAlloc", misuseNilAllocCase},
		{"Concurrency/Collectives", concurrentCollectivesCase},
		{"SplitShared", splitSharedCase},
		{"Compare", compareCase},
		{"P2P/Ssend", ssendCase},
		{"P2P/SelfSendWait", selfSendWaitCase},
		{"VVariants", vvariantsCase},
		{"Misuse/VVariants", misuseVvariantsCase},
		{"Misuse/VVariantsAlias", vvariantsAliasCase},
		{"UserOp", userOpCase},
		{"Misuse/UserOp", misuseUserOpCase},
	}
	out = append(out, asyncCases()...)
	out = append(out, standardCases()...)
	out = append(out, prefixCases()...)
	out = append(out, persistentCases()...)
	out = append(out, cancelCases()...)
	out = append(out, valueCases()...)
	out = append(out, nameCases()...)
	return append(out, typedCases()...)
}

// RunGroup runs every case as a subtest on a fresh group of n in-process
// ranks started by launch (comm/local passes local.Run). launch must run
// fn on every rank and return a non-nil error if any rank's fn did.
func RunGroup(t *testing.T, n int, launch func(ctx context.Context, n int, fn func(ctx context.Context, c comm.Comm) error) error) {
	t.Helper()
	for _, cs := range Cases() {
		t.Run(cs.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
			defer cancel()
			if err := launch(ctx, n, cs.Run); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// RunWorld runs every case as a subtest on c. Every rank of c must call it
// (with the same -run filter): under mpirun each process calls it with the
// world communicator. After each case the ranks agree on the outcome, so a
// case that fails on one rank fails on all, each reporting which ranks
// failed. If the ranks can no longer communicate RunWorld stops.
func RunWorld(t *testing.T, c comm.Comm) {
	t.Helper()
	runWorld(t, c, Cases(), caseTimeout)
}

// runWorld runs cases as subtests on c, agreeing on each outcome.
func runWorld(t *testing.T, c comm.Comm, cases []Case, timeout time.Duration) {
	t.Helper()
	for _, cs := range cases {
		stop := false
		t.Run(cs.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			err := cs.Run(ctx, c)
			var skip errSkip
			if errors.As(err, &skip) {
				// Every rank skips alike (the decision was shared).
				t.Skip(skip.why)
			}
			if err != nil {
				t.Errorf("rank %d of %d: %v", c.Rank(), c.Size(), err)
			}
			ok := int32(1)
			if err != nil {
				ok = 0
			}
			actx, acancel := context.WithTimeout(context.Background(), caseTimeout)
			defer acancel()
			flags, aerr := comm.AllGather(actx, c, []int32{ok})
			if aerr != nil {
				stop = true
				t.Fatalf("rank %d: agreeing on the outcome: %v", c.Rank(), aerr)
			}
			var failed []int
			for r, f := range flags {
				if len(f) != 1 || f[0] != 1 {
					failed = append(failed, r)
				}
			}
			if len(failed) > 0 && err == nil {
				t.Errorf("rank %d: case failed on ranks %v", c.Rank(), failed)
			}
		})
		if stop {
			t.Fatalf("rank %d: communicator unusable after %s; stopping", c.Rank(), cs.Name)
		}
	}
}
