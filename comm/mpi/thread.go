//go:build mpi

package mpi

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// An mpiThread is the OS thread that initializes MPI and, at the end,
// finalizes it: MPI expects MPI_Finalize on the thread that called
// MPI_Init_thread (its "main thread"), while a Go program may call
// Finalize from any goroutine, on any thread. The goroutine stays locked
// to its thread from Init to Finalize, idle in between, and ends with it.
type mpiThread struct {
	calls chan func()
	done  chan struct{}
	tids  []int // the thread id of each call, for tests
}

func startMPIThread() *mpiThread {
	t := &mpiThread{calls: make(chan func()), done: make(chan struct{})}
	go func() {
		// Never unlocked: the thread exits with the goroutine, after
		// MPI_Finalize, so nothing else ever runs on it.
		runtime.LockOSThread()
		defer close(t.done)
		for f := range t.calls {
			t.tids = append(t.tids, unix.Gettid())
			f()
		}
	}()
	return t
}

// do runs f on the thread and waits for it.
func (t *mpiThread) do(f func()) {
	ch := make(chan struct{})
	t.calls <- func() { f(); close(ch) }
	<-ch
}

// stop ends the thread once its calls are done.
func (t *mpiThread) stop() {
	close(t.calls)
	<-t.done
}
