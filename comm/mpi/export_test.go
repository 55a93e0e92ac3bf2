//go:build mpi

package mpi

import (
	"time"

	"github.com/pzgo/pz/comm"
)

// MPIThreadIDs returns the OS thread ids on which w's MPI_Init_thread and
// MPI_Finalize ran (and any other call of its MPI thread), for tests.
func MPIThreadIDs(w *World) []int {
	if w.thread == nil {
		return nil
	}
	<-w.thread.done // stop has returned when Finalize did
	return w.thread.tids
}

// CombinePayload is the agreement step's reduction of an AllReduce
// payload (combinePayload).
var CombinePayload = combinePayload

// PayCode is payCode: which AllReduce rides in the agreement step.
var PayCode = payCode

// Engines is how many engines of non-blocking collectives Finalize would
// wait for.
func Engines(w *World) int {
	w.st.nbcMu.Lock()
	defer w.st.nbcMu.Unlock()
	return len(w.st.nbcs)
}

// SetFinalizeWait sets how long w's Finalize waits for the collectives
// still running on the engines of non-blocking collectives (10 s).
func SetFinalizeWait(w *World, d time.Duration) { w.finalizeWait = d }

// EnginesRunning describes the collective each of w's engines of
// non-blocking collectives is running (comm.NBC.Running), for the engines
// that run one.
func EnginesRunning(w *World) []string {
	w.st.nbcMu.Lock()
	defer w.st.nbcMu.Unlock()
	var running []string
	for _, e := range w.st.nbcs {
		if r := e.Running(); r != "" {
			running = append(running, r)
		}
	}
	return running
}

// WaitingInMPI reports whether a Wait is inside MPI_Wait on r, a
// receive's request.
func WaitingInMPI(r comm.Request) bool { return r.(*request).blocked.Load() }

// Held reports whether a goroutine holds r (a Wait, a Test): with a ctx
// that cannot be canceled, a Wait holds it inside MPI_Wait.
func Held(r comm.Request) bool {
	q := r.(*request)
	if q.mu.TryLock() {
		q.mu.Unlock()
		return false
	}
	return true
}

// FinalizedCleanly reports whether a test finalized MPI through w, and
// Finalize succeeded (TestMain then cannot agree on the exit status).
func FinalizedCleanly(w *World) bool { return w.st.finalized.Load() && w.finalErr == nil }

// ThreadSerialized is MPI_THREAD_SERIALIZED.
const ThreadSerialized = 2

// InitEmbedded initializes MPI at level on a thread of its own, as a C
// program embedding pz would before calling Init (which then adopts it),
// and returns the level MPI provides and the function that finalizes it
// on that thread, after the World's Finalize has left it running.
func InitEmbedded(level int) (finalize func() error, provided int, err error) {
	e, provided, err := initEmbedded(level)
	if err != nil {
		return nil, 0, err
	}
	return e.finalize, provided, nil
}

// Serialized reports whether w makes every MPI call under one lock
// (MPI provides MPI_THREAD_SERIALIZED).
func Serialized(w *World) bool { return w.st.serialize }

// WorldErrorsFatal reports whether MPI_COMM_WORLD's error handler is
// MPI_ERRORS_ARE_FATAL (MPI_Init's; pz sets MPI_ERRORS_RETURN while it
// uses an adopted MPI). MPI must be initialized.
func WorldErrorsFatal() bool { return worldErrorsFatal() }

// HeldInMPI reports what w still holds in MPI that pz made: the
// communicators not freed, the persistent requests, whether the types
// and ops of Init and of user reductions are still allocated.
func HeldInMPI(w *World) (comms, persist int, types, userOps bool) {
	w.st.cmu.Lock()
	comms = len(w.st.comms)
	w.st.cmu.Unlock()
	w.st.pmu.Lock()
	for p := range w.st.persist {
		if !p.orphaned.Load() && *p.req != w.st.h.request_null {
			persist++
		}
	}
	w.st.pmu.Unlock()
	return comms, persist, w.st.agreeMade || w.st.locMade || w.st.errhHeld, w.st.userHeld.Load()
}

// SerializedTogether reports whether b's MPI calls wait while a makes
// one: with a's lock of MPI calls held, b cannot take its own.
func SerializedTogether(a, b *World) bool {
	a.st.lock()
	defer a.st.unlock()
	if b.st.lockWithin(0) {
		b.st.unlock()
		return false
	}
	return true
}

// WithInitFault makes Init fail at step (after MPI_Comm_split_type: the
// last step, once everything of Init is made) with the error fault
// returns there.
func WithInitFault(fault func(step string) error) Option {
	return func(c *config) { c.initFault = fault }
}

// ErrhRefs is the number of references Worlds hold to MPI_COMM_WORLD's
// saved error handler (errh.c): one per World on an adopted MPI.
func ErrhRefs() int { return errhRefs() }

// SetBlocking sets the form of c's collectives (WithBlocking), as Init's
// option does for a World and what is made from it; every rank must set
// the same. At MPI_THREAD_SERIALIZED the collectives stay polled. The
// engine's duplicate keeps its blocking form (withEngine).
func SetBlocking(c *Comm, on bool) {
	c.coll.Lock()
	c.block = on && !c.st.serialize
	c.coll.Unlock()
}

// EngineBlocking reports whether the collectives of c's engine of
// non-blocking collectives (on its private duplicate) take the blocking
// form; false for a communicator without one.
func EngineBlocking(c *Comm) bool {
	if c.nbcComm == nil {
		return false
	}
	return c.nbcComm.Blocking()
}
