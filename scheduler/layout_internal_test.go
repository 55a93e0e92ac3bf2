package scheduler

import (
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestHandleLayout: the handle's RAM buffer, which implementations read,
// has a cache line of its own, apart from the fields that submission
// writes as it wires each access (see Handle),
// and the handle fills the 384-byte size class, a whole number of lines,
// so that no line is shared by two handles.
func TestHandleLayout(t *testing.T) {
	var h Handle
	assert.EqualValues(t, 64, unsafe.Offsetof(h.ram))
	assert.EqualValues(t, 64, unsafe.Sizeof(h.ram))
	assert.EqualValues(t, 128, unsafe.Offsetof(h.cur))
	assert.Less(t, unsafe.Offsetof(h.curCat), uintptr(192), "the wiring state in line 2")
	assert.True(t, unsafe.Sizeof(h) > 352 && unsafe.Sizeof(h) <= 384, "size %d: in the 384-byte size class", unsafe.Sizeof(h))
}

// TestStoreUnpublished: the plain stores of storeUnpublished set the
// atomics' values (an atomic.Int32 or Uint32 is its value alone).
func TestStoreUnpublished(t *testing.T) {
	var (
		i atomic.Int32
		u atomic.Uint32
	)
	storeUnpublished(&i, -7)
	storeUnpublishedU(&u, stateSubmitted)
	assert.EqualValues(t, -7, i.Load())
	assert.Equal(t, stateSubmitted, u.Load())
	assert.EqualValues(t, 4, unsafe.Sizeof(i))
	assert.EqualValues(t, 4, unsafe.Sizeof(u))
}
