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

// Another operation (a point-to-point call) is timed the same way, from
// the first check that sees it, and a slot freed by end is reused with a
// clock of its own.
func TestWatchOps(t *testing.T) {
	var out bytes.Buffer
	exited := -1
	w := &watch{report: time.Second, timeout: 4 * time.Second, rank: 0, size: 3, out: &out, exit: func(code int) { exited = code }}
	t0 := time.Unix(2000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	id := w.begin("MPI_Recv", 3)
	w.check(at(10 * time.Second)) // the first check that sees it starts its clock
	assert.Empty(t, out.String())
	w.check(at(10*time.Second + 500*time.Millisecond))
	assert.Empty(t, out.String(), "half a report interval")
	w.check(at(11*time.Second + 200*time.Millisecond))
	assert.Contains(t, out.String(), "pz mpi: rank 0 of 3: waiting 1.2s in MPI_Recv;")
	w.end(id)
	out.Reset()

	id2 := w.begin("MPI_Send", 3)
	assert.Equal(t, id, id2, "the freed slot is reused")
	w.check(at(20 * time.Second))
	w.check(at(23 * time.Second))
	assert.Equal(t, -1, exited, "3s of 4")
	w.check(at(24 * time.Second))
	assert.Contains(t, out.String(), "waiting 4s in MPI_Send; ending the job (PZ_COMM_TIMEOUT=4s)")
	assert.Equal(t, TimeoutExit, exited)
}
