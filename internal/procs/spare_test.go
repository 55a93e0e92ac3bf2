package procs

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRaiseSpare: a P beyond the busy workers when they take every P,
// none when one is free or the user set GOMAXPROCS; Restore puts it
// back, unless GOMAXPROCS changed since.
func TestRaiseSpare(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(2)

	s := RaiseSpare(2, "")
	assert.Equal(t, Spare{From: 2, To: 3}, s)
	assert.Equal(t, 3, runtime.GOMAXPROCS(0))
	s.Restore()
	assert.Equal(t, 2, runtime.GOMAXPROCS(0))

	s = RaiseSpare(4, "") // more workers than Ps: one P beyond them
	assert.Equal(t, Spare{From: 2, To: 5}, s)
	s.Restore()
	assert.Equal(t, 2, runtime.GOMAXPROCS(0))

	assert.Equal(t, Spare{}, RaiseSpare(1, ""), "a P is free")
	assert.Equal(t, Spare{}, RaiseSpare(2, "2"), "the user's GOMAXPROCS")
	assert.Equal(t, 2, runtime.GOMAXPROCS(0))
	assert.Equal(t, Spare{From: 2, To: 3}, RaiseSpare(2, "abc"), "a value the runtime ignores is not the user's choice")

	runtime.GOMAXPROCS(7) // changed since: kept
	Spare{From: 2, To: 3}.Restore()
	assert.Equal(t, 7, runtime.GOMAXPROCS(0))
	Spare{}.Restore()
	assert.Equal(t, 7, runtime.GOMAXPROCS(0))
}
