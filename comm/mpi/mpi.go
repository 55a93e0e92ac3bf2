//go:build mpi

package mpi

/*
#include "pz_mpi.h"
#include "pz_agree.h"
#include "pz_loc.h"
#include <sched.h>
int pz_errh_acquire(MPI_Comm world);
int pz_errh_release(MPI_Comm world);
int pz_errh_refs_held(void);
*/
import "C"

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/internal/procs"
)

// initMu serializes Init and Finalize. It and serialMu are the package's
// only mutable package-level state, and MPI forces them: MPI_Init_thread
// and MPI_Finalize act on the whole process and may each be called once
// per process.
var initMu sync.Mutex

// serialMu is held around each MPI call of every World whose MPI gives
// MPI_THREAD_SERIALIZED (state.serialize). The thread level is the
// process's, not a World's: a second World on the same MPI (runtimeview
// adopts the MPI a World of the program uses) must not call MPI while
// the first does.
var serialMu sync.Mutex

// Available reports whether this binary was built with MPI support (the mpi
// build tag). It is true in this build.
func Available() bool { return true }

// Initialized reports whether MPI is initialized and not yet finalized in
// this process, by pz or by anyone else.
func Initialized() bool {
	var ini, fin C.int
	C.pz_state(&ini, &fin)
	return ini != 0 && fin == 0
}

// state is shared, read-only after Init, by a World and every communicator
// derived from it.
type state struct {
	h         C.pz_handles // cached MPI handles; never written after Init
	check     bool         // run the agreement step before collectives
	serialize bool         // MPI gave MPI_THREAD_SERIALIZED: one call at a time, under serialMu
	block     bool         // the collectives' form by default (WithBlocking; never with serialize)
	maxErr    int          // MPI_MAX_ERROR_STRING
	tagUB     int          // MPI_TAG_UB: the largest tag the library takes
	finalized atomic.Bool  // Finalize ran: no MPI call may follow (MPI finalized, or left so: ErrUnfinalized)
	ending    atomic.Bool  // Finalize is ending the pending requests (end.go); set before finalized
	progress  progress     // tests the requests waited on through Done
	slots     slots        // the memory of pending non-blocking operations (request.go)
	watch     *watch       // reports operations stuck for long (watch.go)
	gateMu    sync.Mutex   // held by finishGate for each test, and by Finalize to stop it (stopGates)
	gatesEnd  bool         // Finalize stopped finishGate: no test may follow; guarded by gateMu
	nbcMu     sync.Mutex
	nbcs      []*comm.NBC // the engines of non-blocking collectives Finalize waits for (addEngine)
	pmu       sync.Mutex
	persist   map[*persistent]struct{} // the persistent requests not freed, for Free and Finalize (end.go)
	// minmaxGo marks the unsigned datatypes whose MPI_MIN and MPI_MAX the
	// library gets wrong (pz_minmax_ok); pz combines them in Go instead.
	minmaxGo [C.PZ_NTYPES]bool
	// cudaAware: the library reaches CUDA device memory (pz_cuda_aware,
	// asked at Init: comm.DeviceComm's space "cuda").
	cudaAware bool
	// The element and op of the agreement step (pz_agree.h).
	agreeType C.MPI_Datatype
	agreeOp   C.MPI_Op
	// The same as integers, for pz_agree_step (no pointer for cgo to check).
	agreeTypeU, agreeOpU C.uintptr_t
	// h's datatypes and ops as integers, for the calls that take them so.
	typesU [C.PZ_NTYPES]C.uintptr_t
	opsU   [C.PZ_NOPS]C.uintptr_t
	// agreeMade and locMade say that Init made those types and ops,
	// which Finalize frees.
	agreeMade, locMade bool
	locPair            C.MPI_Datatype               // two int64 words: a comm.LocComm pair
	locOps             [C.PZ_LOC_NTYPES][2]C.MPI_Op // MinLoc, MaxLoc per value type (comm.Datatype - 1)
	// p2pBlocking counts the blocking point-to-point calls (waits,
	// probes included) of every goroutine, for yieldEvery.
	p2pBlocking atomic.Uint64
	// comms are the communicators pz made (every Comm but the world's)
	// and not freed, by the order of their making, which an adopted
	// World's Finalize frees (release).
	cmu   sync.Mutex
	comms map[*Comm]uint64
	cseq  uint64
	// userHeld: this state holds a reference to the key and the ops of
	// user reductions (userop.c), taken by its first (userAcquire).
	userMu   sync.Mutex
	userHeld atomic.Bool
	// errhHeld: this state holds a reference to the error handler an
	// adopted MPI_COMM_WORLD had before pz (errh.c), given back when the
	// last World's use of MPI ends.
	errhHeld bool
}

// addComm records c, a communicator pz made, for release.
func (s *state) addComm(c *Comm) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if s.comms == nil {
		s.comms = map[*Comm]uint64{}
	}
	s.cseq++
	s.comms[c] = s.cseq
}

// dropComm forgets c, freed (Comm.Free).
func (s *state) dropComm(c *Comm) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	delete(s.comms, c)
}

// paceP2P counts one blocking point-to-point call (yieldEvery).
func (s *state) paceP2P() { yieldEvery(s.p2pBlocking.Add(1)) }

// lock takes the lock of MPI calls (serialMu) when MPI serializes them.
func (s *state) lock() {
	if s.serialize {
		serialMu.Lock()
	}
}

// unlock releases what lock took.
func (s *state) unlock() {
	if s.serialize {
		serialMu.Unlock()
	}
}

// World is the MPI_COMM_WORLD communicator returned by Init, with what Init
// found out about the process. It implements comm.Comm through *Comm.
type World struct {
	*Comm
	started     bool       // pz called MPI_Init_thread and will finalize
	thread      *mpiThread // where it did, and will (nil when adopted)
	threadLevel int
	localSize   int
	procs       procs.Report
	finalOnce   sync.Once
	finalErr    error
	// finalizeWait bounds Finalize's wait for the collectives still
	// running on the engines of non-blocking collectives (the constant
	// finalizeWait; tests shorten it).
	finalizeWait time.Duration
}

// Init initializes MPI (MPI_Init_thread asking for MPI_THREAD_MULTIPLE) and
// returns the world communicator. If MPI is already initialized, by this
// package or by the program embedding Go, Init adopts it and the returned
// World's Finalize leaves MPI running (see Finalize). MPI can be initialized once per
// process: after MPI_Finalize, Init returns ErrFinalized.
//
// Init also counts the ranks on this node (MPI_Comm_split_type with
// MPI_COMM_TYPE_SHARED) and, unless WithGOMAXPROCS(false) is given or the
// GOMAXPROCS environment variable is set, sizes GOMAXPROCS to this rank's
// share of the node (see internal/procs). Init is collective over
// MPI_COMM_WORLD. ctx bounds nothing that MPI lets Go interrupt (MPI_Init
// cannot be canceled); it is checked before starting. An Init that fails
// on an adopted MPI frees what it made there and gives MPI_COMM_WORLD its
// error handler back, leaving MPI as it was; one that initialized MPI
// finalizes it.
func Init(ctx context.Context, opts ...Option) (*World, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mpi: Init: %w", err)
	}
	cfg := newConfig(opts)
	initMu.Lock()
	defer initMu.Unlock()

	st := &state{maxErr: int(C.pz_max_error_string())}
	C.pz_handles_get(&st.h)
	w := &World{finalizeWait: finalizeWait}
	var ini, fin C.int
	C.pz_state(&ini, &fin)
	if fin != 0 {
		return nil, fmt.Errorf("%w; it cannot be initialized again in this process", ErrFinalized)
	}
	var provided C.int
	if ini == 0 {
		// Open MPI 4.1's op/avx component saturates 8- and 16-bit integer
		// sums (255+1 gives 255 for uint8). MPI reads its MCA parameters
		// from the environment at MPI_Init, so pz excludes that component
		// unless the user chose the op components.
		if _, set := os.LookupEnv("OMPI_MCA_op"); !set {
			if err := os.Setenv("OMPI_MCA_op", "^avx"); err != nil {
				return nil, fmt.Errorf("mpi: Init: %w", err)
			}
		}
		w.thread = startMPIThread()
		var rc C.int
		w.thread.do(func() { rc = C.pz_init(st.h.thread_multiple, &provided) })
		if rc != 0 {
			w.thread.stop()
			return nil, fmt.Errorf("mpi: Init: %w", st.error("MPI_Init_thread", rc))
		}
		w.started = true
	} else if rc := C.pz_query_thread(&provided); rc != 0 {
		return nil, fmt.Errorf("mpi: Init: %w", st.error("MPI_Query_thread", rc))
	}
	w.threadLevel = int(provided)
	switch {
	case provided >= st.h.thread_multiple:
	case provided >= st.h.thread_serialized:
		st.serialize = true
	default:
		return w.initFailed(st, fmt.Errorf("%w: it provides level %d; initialize MPI with MPI_Init_thread(MPI_THREAD_MULTIPLE) or let pz do it", ErrThreadLevel, provided))
	}
	st.block = cfg.blockingEnabled() && !st.serialize
	report, timeout, err := cfg.watchDurations()
	if err != nil {
		return w.initFailed(st, fmt.Errorf("mpi: Init: %w", err))
	}
	var tagUB C.int
	if rc := C.pz_tag_ub(st.h.world, &tagUB); rc != 0 {
		return w.initFailed(st, fmt.Errorf("mpi: Init: %w", st.error("MPI_Comm_get_attr", rc)))
	}
	st.tagUB = int(tagUB)
	for _, t := range []comm.Datatype{comm.Uint8, comm.Uint16, comm.Uint32, comm.Uint64} {
		st.minmaxGo[t] = C.pz_minmax_ok(st.h.types[t], C.int(t.Size())) == 0
	}
	st.cudaAware = C.pz_cuda_aware() != 0
	if rc := C.pz_agree_init(&st.agreeType, &st.agreeOp); rc != 0 {
		return w.initFailed(st, fmt.Errorf("mpi: Init: %w", st.error("MPI_Op_create", rc)))
	}
	st.agreeMade = true
	st.agreeTypeU, st.agreeOpU = C.pz_type_u(st.agreeType), C.pz_op_u(st.agreeOp)
	for i := range st.typesU {
		st.typesU[i] = C.pz_type_u(st.h.types[i])
	}
	for i := range st.opsU {
		st.opsU[i] = C.pz_op_u(st.h.ops[i])
	}
	if rc := C.pz_loc_init(&st.locPair, &st.locOps[0]); rc != 0 {
		return w.initFailed(st, fmt.Errorf("mpi: Init: %w", st.error("MPI_Op_create", rc)))
	}
	st.locMade = true
	if !w.started {
		// pz sets MPI_ERRORS_RETURN on the world (newComm); the owner's
		// handler comes back when the use of MPI of the last World
		// that adopted it ends (release).
		if rc := C.pz_errh_acquire(st.h.world); rc != 0 {
			return w.initFailed(st, fmt.Errorf("mpi: Init: %w", st.error("MPI_Comm_get_errhandler", rc)))
		}
		st.errhHeld = true
	}
	c, err := newComm(st, st.h.world, true, cfg.checkEnabled())
	if err == nil {
		err = c.withEngine()
	}
	if err == nil {
		st.watch = newWatch(report, timeout, c.rank, c.size)
	}
	if err != nil {
		return w.initFailed(st, fmt.Errorf("mpi: Init: %w", err))
	}
	w.Comm = c
	// The ranks on this node and their affinity masks, so that each rank's
	// GOMAXPROCS share comes from the real bindings (procs.MaskShare). A
	// rank that cannot read its mask sends an empty one (every rank must
	// take part) and falls back to the estimate.
	mine, merr := procs.AffinityMask()
	all := make([]procs.CPUMask, c.size)
	var local C.int
	if rc := C.pz_node_masks(st.h.world, (*C.uint64_t)(unsafe.Pointer(&mine[0])), procs.MaskWords,
		(*C.uint64_t)(unsafe.Pointer(&all[0][0])), &local); rc != 0 {
		return w.initFailed(st, fmt.Errorf("mpi: Init: %w", st.error("MPI_Comm_split_type", rc)))
	}
	if err := cfg.fault("after MPI_Comm_split_type"); err != nil {
		return w.initFailed(st, fmt.Errorf("mpi: Init: %w", err))
	}
	w.localSize = int(local)
	in := procs.Gather(w.localSize)
	if merr == nil {
		in.MaskShare = procs.MaskShare(mine, all[:w.localSize])
	}
	if cfg.gomaxproc {
		w.procs = procs.ApplyInput(in)
	} else {
		w.procs = procs.Report{Input: in}
		w.procs.Before, w.procs.After, w.procs.Procs = w.procs.Current, w.procs.Current, w.procs.Current
		w.procs.Reason = "not sized (WithGOMAXPROCS(false))"
	}
	return w, nil
}

// initFailed is Init's one way out after MPI is initialized (or adopted):
// it undoes what Init made in st and returns err. MPI that Init started is
// finalized (which frees everything). On an adopted MPI, st is released
// as an adopted World's Finalize releases it: the communicators made (the engines' duplicate of the
// world), the types and ops of the agreement step and of AllReduceLoc,
// and the reference to MPI_COMM_WORLD's error handler, which the last
// reference gives back; so a failed Init leaves MPI as its owner had it,
// and a later Init can succeed. Before, each failure past the types
// returned without freeing them, and one past newComm kept the error
// handler's reference, so the world never got its handler back.
func (w *World) initFailed(st *state, err error) (*World, error) {
	st.watch.close()
	if w.started {
		w.finalizeOnThread()
		return nil, err
	}
	st.finalized.Store(true) // nothing of this Init calls MPI again
	if rerr := st.release(); rerr != nil {
		err = fmt.Errorf("%w; freeing what Init had made in MPI failed too: %w", err, rerr)
	}
	return nil, err
}

// finalizeWait bounds how long Finalize waits for collectives still
// running on the engines of non-blocking collectives: long enough for the
// other ranks to reach theirs when they are finalizing too, short enough
// that a program whose rank never will ends with a clear error.
const finalizeWait = 10 * time.Second

// Finalize finalizes MPI if this World's Init started it (MPI_Finalize is
// collective: call it on every rank, after every other MPI call). It is
// idempotent: later calls return the first call's error. Afterwards every
// communicator of this World returns ErrFinalized (wrapping
// comm.ErrFreed), and Init cannot be called again.
//
// If MPI was adopted, Finalize ends pz's use of it and leaves it
// initialized, for its owner to finalize: it ends the engines and the
// requests as below, then frees what pz made in MPI - the communicators
// made by Dup, Split, SplitShared, Import and for the engines and not
// freed (a communicator broken by an abandoned collective excepted, as
// Free leaves it), the persistent requests, the datatypes and ops of
// Init and of user reductions - and gives MPI_COMM_WORLD back the error
// handler it had before pz (if other Worlds adopted the same MPI, the
// last of them to finalize does). When it returns nil, pz makes no further MPI
// call and the owner may call MPI_Finalize at once; it is collective
// like MPI_Finalize (MPI_Comm_free is). The owner's communicators
// (those given to Import) stay the owner's. An error wrapping
// ErrUnfinalized (below) means that the owner must not finalize MPI.
//
// The point-to-point requests still pending on any communicator end first,
// as Comm.Free ends a communicator's: receives are canceled, sends handed
// to MPI, and each completes with an error wrapping comm.ErrFreed, so
// that their Wait and Test return at once, without calling MPI (a Wait or
// Test after MPI_Finalize aborted the process). A send that a goroutine
// waits for inside MPI_Wait (a Wait whose ctx cannot be canceled) is
// waited for up to 2 seconds, and otherwise leaves MPI unfinalized, as
// below.
//
// Finalize first stops the engines of non-blocking collectives (see
// comm.NBC). One whose collective is running, which MPI cannot cancel,
// is waited for up to 10 seconds: it ends when the other ranks take part
// in it, soon if they are finalizing too. If one is still inside MPI
// then (another rank never started that collective), Finalize does not
// call MPI_Finalize, which would be undefined with a thread inside MPI
// (Open MPI can unload the code that thread runs: a crash, or
// MPI_Finalize hangs). It returns an error wrapping ErrUnfinalized that
// names each collective still running (its call, its place among its
// communicator's non-blocking collectives and the rank). The rest of
// the shutdown happens as usual - no MPI call of pz follows, the thread
// that initialized MPI ends - and MPI stays initialized (a later Init
// adopts it): the process can exit, and mpirun then reports that this
// rank exited without calling MPI_Finalize and ends the job, which is
// how the error reaches the other ranks. On an adopted MPI nothing is
// freed then, and the error says that the owner must not call
// MPI_Finalize (a thread is inside MPI): it may exit without it, or end
// the job with MPI_Abort.
func (w *World) Finalize() error {
	w.finalOnce.Do(func() { w.finalErr = w.finalize() })
	return w.finalErr
}

// finalize is Finalize's single run.
func (w *World) finalize() error {
	w.st.watch.close()
	// The engines of non-blocking collectives stop before MPI does: the
	// collectives queued on them fail (comm.ErrFreed), and one running,
	// which MPI cannot cancel, is waited for.
	w.st.nbcMu.Lock()
	engines := slices.Clone(w.st.nbcs)
	w.st.nbcMu.Unlock()
	for _, n := range engines {
		_ = n.Close()
	}
	running := w.waitEngines()
	// The point-to-point requests still pending on any communicator end
	// (end.go): receives canceled, sends handed to MPI, each completing
	// with comm.ErrFreed, so that no Wait or Test calls MPI after
	// MPI_Finalize (Open MPI aborts the process then) and none waits for
	// ever. A send that a goroutine waits for inside MPI_Wait is waited
	// for, up to endWait.
	w.st.ending.Store(true)
	held := stillWaiting(w.st.endPending(nil, time.Now().Add(endWait), true))
	// So does the progress engine: no MPI call may follow Finalize.
	w.st.progress.shutdown()
	// So do the goroutines completing abandoned gates (handle.go).
	w.st.stopGates()
	initMu.Lock()
	defer initMu.Unlock()
	w.st.finalized.Store(true)
	if running != nil || held != nil {
		var inside []error
		if running != nil {
			inside = append(inside, fmt.Errorf("Finalize found non-blocking collectives still inside MPI: %w", running))
		}
		if held != nil {
			inside = append(inside, fmt.Errorf("Finalize found waits for sends still inside MPI_Wait after %v: %w", endWait, held))
		}
		if !w.started {
			// Nothing is freed: the goroutines inside MPI use what pz
			// made.
			return fmt.Errorf("%w: %w; "+
				"pz initialized no MPI here (it adopted the program's), and a thread of pz is still inside MPI: "+
				"the program must not call MPI_Finalize yet (finalizing MPI while a thread is inside it is undefined: "+
				"Open MPI may crash or hang); it may exit without MPI_Finalize, or end the job with MPI_Abort",
				ErrUnfinalized, stillRunning(inside))
		}
		// The goroutines inside MPI stay there until the other ranks
		// take part (if ever); the thread that initialized MPI has
		// nothing left to do.
		w.thread.stop()
		return fmt.Errorf("%w: %w; "+
			"finalizing MPI while a thread is inside it is undefined (Open MPI may crash or hang), "+
			"so MPI stays initialized: this process may exit, and mpirun then reports that it exited "+
			"without calling MPI_Finalize", ErrUnfinalized, stillRunning(inside))
	}
	if !w.started {
		if err := w.st.release(); err != nil {
			return fmt.Errorf("mpi: Finalize: %w", err)
		}
		return nil
	}
	if rc := w.finalizeOnThread(); rc != 0 {
		return fmt.Errorf("mpi: Finalize: %w", w.st.error("MPI_Finalize", rc))
	}
	return nil
}

// release frees what pz made on an adopted MPI, which stays initialized
// for its owner, once every request has ended and no engine runs: the
// persistent requests not freed, the communicators pz made and did not
// free (Dup, Split, SplitShared, Import's duplicates and the engines'
// private ones, by the order of their making: MPI_Comm_free is
// collective, and every rank finalizes), the datatypes and ops Init
// made, the key and ops of user reductions; and, for the last World on
// that MPI to end its use, it gives MPI_COMM_WORLD its error handler
// back (errh.c). A communicator broken by an abandoned
// collective is left, as Free leaves it: MPI may still hold that
// collective. s.finalized is set: no other call of pz reaches MPI.
func (s *state) release() error {
	s.lock()
	defer s.unlock()
	var errs []error
	fail := func(call string, rc C.int) {
		if rc != 0 {
			errs = append(errs, s.errorLocked(call, rc))
		}
	}
	s.pmu.Lock()
	for p := range s.persist {
		if !p.orphaned.Load() && *p.req != s.h.request_null {
			fail("MPI_Request_free", C.pz_request_free(p.req))
		}
		if p.dt.made {
			fail("MPI_Type_free", C.pz_type_free(&p.dt.t))
			p.dt.made = false
		}
	}
	s.pmu.Unlock()
	s.cmu.Lock()
	comms := make([]*Comm, 0, len(s.comms))
	for c := range s.comms {
		comms = append(comms, c)
	}
	slices.SortFunc(comms, func(a, b *Comm) int { return cmp.Compare(s.comms[a], s.comms[b]) })
	clear(s.comms)
	s.cmu.Unlock()
	for _, c := range comms {
		if c.broken.Load() == nil && !c.freed.Swap(true) {
			fail("MPI_Comm_free", C.pz_comm_free(&c.c))
		}
	}
	if s.agreeMade {
		C.pz_agree_free(&s.agreeType, &s.agreeOp)
		s.agreeMade = false
	}
	if s.locMade {
		C.pz_loc_free(&s.locPair, &s.locOps[0])
		s.locMade = false
	}
	s.releaseUser()
	if s.errhHeld {
		fail("MPI_Comm_set_errhandler", C.pz_errh_release(s.h.world))
		s.errhHeld = false
	}
	return errors.Join(errs...)
}

// waitEngines waits, up to w.finalizeWait in all, until no goroutine of an
// engine of non-blocking collectives is inside a collective (comm.NBC's
// WaitIdle). It returns nil then, or the errors of the engines still
// running one, each naming its collective.
func (w *World) waitEngines() error {
	w.st.nbcMu.Lock()
	engines := w.st.nbcs
	w.st.nbcMu.Unlock()
	ctx, cancel := context.WithTimeoutCause(context.Background(), w.finalizeWait,
		fmt.Errorf("another rank has not taken part in it within %v", w.finalizeWait))
	defer cancel()
	var running stillRunning
	for _, e := range engines {
		// Past the bound, WaitIdle returns at once: each engine still
		// running is named, none is waited for again.
		if err := e.WaitIdle(ctx); err != nil {
			running = append(running, err)
		}
	}
	if running == nil {
		return nil
	}
	return running
}

// stillRunning lists the engines' errors for the collectives that
// Finalize found inside MPI, on one line.
type stillRunning []error

func (r stillRunning) Error() string {
	msgs := make([]string, len(r))
	for i, err := range r {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (r stillRunning) Unwrap() []error { return r }

// finalizeOnThread calls MPI_Finalize on the thread that initialized MPI
// and ends that thread.
func (w *World) finalizeOnThread() C.int {
	var rc C.int
	// MPI_Finalize waits for every rank: a wait for a rank that never
	// finalizes is reported (and bounded) as a stalled collective is.
	stop := w.st.watch.finalizing()
	defer stop()
	w.thread.do(func() {
		// The types and ops Init made are freed first: MPICH reports
		// those still allocated at MPI_Finalize as leaked ("yaksa: 2
		// leaked handle pool objects").
		if w.st.agreeMade {
			C.pz_agree_free(&w.st.agreeType, &w.st.agreeOp)
		}
		if w.st.locMade {
			C.pz_loc_free(&w.st.locPair, &w.st.locOps[0])
		}
		rc = C.pz_finalize()
	})
	w.thread.stop()
	return rc
}

// Started reports whether this World's Init initialized MPI (and Finalize
// will finalize it), as opposed to adopting it.
func (w *World) Started() bool { return w.started }

// ThreadLevel is the thread support MPI provides (MPI_THREAD_MULTIPLE = 3
// in Open MPI; 2, serialized, makes pz serialize every call).
func (w *World) ThreadLevel() int { return w.threadLevel }

// LocalSize is the number of ranks on this node: the size of
// MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED).
func (w *World) LocalSize() int { return w.localSize }

// Procs reports how Init sized GOMAXPROCS.
func (w *World) Procs() procs.Report { return w.procs }

// error turns an MPI error code into an *Error. It takes s's lock
// (MPI_Error_string and MPI_Error_class are MPI calls like any other):
// the caller does not hold it.
func (s *state) error(call string, rc C.int) error {
	s.lock()
	defer s.unlock()
	return s.errorLocked(call, rc)
}

// errorLocked is error for a caller that holds s's lock.
func (s *state) errorLocked(call string, rc C.int) error {
	buf := make([]byte, s.maxErr+1)
	var n, class C.int
	C.pz_error_string(rc, (*C.char)(unsafe.Pointer(&buf[0])), &n, &class)
	return &Error{Call: call, Code: int(rc), Class: int(class), Msg: string(buf[:max(int(n), 0)]),
		Truncated: class == s.h.err_truncate}
}

// Polling: when ctx can be canceled, pz starts the non-blocking form of an
// operation and tests it until it completes or ctx is done. MPI makes
// progress only inside MPI calls (Open MPI's shared-memory transport has no
// progress thread), so the backoff stays short, and an operation that moves
// much data is tested without sleeping for as long as its bytes could
// still be moving at pollRate: a large message arrives in many fragments,
// each needing a test to move on.
//
// A wait sleeps only once it has lasted pollSpinWindow. A Go timer on an
// otherwise idle P fires about 1 ms late, whatever the duration asked
// (the runtime's netpoll waits whole milliseconds), so a wait that slept
// after a few hundred tests, as it did, turned an 8-byte ping-pong with
// a cancelable context into 2-3 ms round trips once both ranks fell into
// sleeping, each waiting out the other's sleep (BenchmarkP2P's
// pingpong-polled under mpirun: 4 µs or 3 ms, from run to run); a window
// of 1 ms only made the rhythm rarer, as any hiccup of a millisecond
// started it again. Until then it tests, with a Gosched every
// pollGoschedEvery tests, which runs the rank's other goroutines, and a
// sched_yield every pollYieldEvery tests, which runs the other processes
// an oversubscribed mpirun puts on the core (Open MPI's own waits yield
// so when oversubscribed). This is what a blocking MPI_Wait costs (it
// spins for as long as it waits); past the window, where a sleep's extra
// millisecond is at most 5% of the wait, the wait backs off to sleeps.
const (
	pollSpins        = 256                    // tests before the clock is read (Goscheds only)
	pollSpinWindow   = 20 * time.Millisecond  // then tests with yields in between for this long
	pollYieldEvery   = 16                     // tests between two sched_yield calls (and clock reads) in the window
	pollGoschedEvery = 4                      // tests between two Goscheds while spinning
	pollMinSleep     = 2 * time.Microsecond   // first sleep after the window
	pollMaxSleep     = 200 * time.Microsecond // longest sleep between tests
	pollRate         = 128 << 20              // bytes per second assumed while spinning
)

// spinFor is how long poll spins for an operation moving nbytes.
func spinFor(nbytes int) time.Duration {
	return time.Duration(float64(nbytes) / pollRate * float64(time.Second))
}

// poll calls test until it reports done or an error, or ctx is done. It
// tests without sleeping for pollSpins tests and then for
// max(pollSpinWindow, spin), then backs off.
func poll(ctx context.Context, spin time.Duration, test func() (bool, error)) error {
	return poller{now: time.Now, sleep: time.Sleep, yield: osYield}.poll(ctx, spin, test)
}

// osYield gives the calling thread's core to another thread or process
// that wants it, if any.
func osYield() { C.sched_yield() }

// poller is poll with its clock, its sleep and its yield to the
// operating system (tests give their own).
type poller struct {
	now   func() time.Time
	sleep func(time.Duration)
	yield func()
}

// ctxErr is the error of an operation that ctx ended: its cause (a
// signal's, say, as comm/local reports it), still wrapping ctx.Err().
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, err) {
		return fmt.Errorf("%w: %w", err, cause)
	} else if cause != nil {
		return cause
	}
	return err
}

func (p poller) poll(ctx context.Context, spin time.Duration, test func() (bool, error)) error {
	sleep := pollMinSleep
	var until time.Time // zero until pollSpins tests are done
	spinning := true
	for i := 0; ; i++ {
		done, err := test()
		if done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctxErr(ctx)
		default:
		}
		if spinning && i >= pollSpins {
			switch {
			case until.IsZero():
				until = p.now().Add(max(pollSpinWindow, spin))
			case i%pollYieldEvery != 0:
			case p.now().Before(until):
				p.yield()
			default:
				spinning = false
			}
		}
		if spinning {
			if i%pollGoschedEvery == pollGoschedEvery-1 {
				runtime.Gosched()
			}
			continue
		}
		p.sleep(sleep)
		sleep = min(2*sleep, pollMaxSleep)
	}
}

// errhRefs is the number of references to MPI_COMM_WORLD's saved error
// handler (errh.c) that Worlds hold: tests check what a failed Init left.
func errhRefs() int { return int(C.pz_errh_refs_held()) }
