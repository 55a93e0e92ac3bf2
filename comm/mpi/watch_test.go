//go:build mpi

package mpi

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A collective in progress in its communicator's slot is timed from the
// first check that sees it, reported once per report interval with its
// call and number, forgotten when it ends, and ends the process past the
// timeout.
func TestWatchCollSlot(t *testing.T) {
	var out bytes.Buffer
	exited := -1
	w := &watch{report: time.Second, timeout: 5 * time.Second, rank: 1, size: 2, out: &out, exit: func(code int) { exited = code }}
	s := w.collSlot(2)
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	s.begin("MPI_Allreduce", 7)
	w.check(at(0))
	w.check(at(500 * time.Millisecond))
	assert.Empty(t, out.String(), "half a report interval")
	w.check(at(1500 * time.Millisecond))
	assert.Contains(t, out.String(), "pz mpi: rank 1 of 2: waiting 1.5s in MPI_Allreduce (collective #7 on a communicator of 2 ranks)")
	out.Reset()
	w.check(at(2 * time.Second))
	assert.Empty(t, out.String(), "reported once per interval")

	s.end()
	s.begin("MPI_Bcast", 8) // the next collective starts its own clock
	w.check(at(3 * time.Second))
	w.check(at(3500 * time.Millisecond))
	assert.Empty(t, out.String())
	w.check(at(8 * time.Second))
	assert.Contains(t, out.String(), "waiting 5s in MPI_Bcast (collective #8")
	assert.Contains(t, out.String(), "ending the job (PZ_COMM_TIMEOUT=5s)")
	assert.Equal(t, TimeoutExit, exited)

	s.end()
	out.Reset()
	w.dropSlot(s)
	s.begin("MPI_Barrier", 9) // a freed communicator's slot is no longer read
	w.check(at(time.Hour))
	assert.Empty(t, out.String())

	// With reports and the timeout off there is no slot to fill.
	assert.Nil(t, (&watch{}).collSlot(2))
}
