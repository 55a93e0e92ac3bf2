// Package shared is what the two clients of examples/stm share: the
// synthetic camera frame, the checksum that stands for detection, and the
// detections in memory that both processes map.
//
// Nothing here allocates after Open: the clients call these functions
// from their runnables, inside the scheduler's loop.
package shared

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// FrameBytes is the size of a frame: 640×480 grey pixels.
const FrameBytes = 640 * 480

// Fill draws frame id into buf (FrameBytes long): the id in its first 8
// bytes, then pixels from a xorshift generator seeded by the id, so that
// every process draws the same frame for the same id.
func Fill(buf []byte, id uint64) {
	binary.LittleEndian.PutUint64(buf, id)
	x := id*0x9e3779b97f4a7c15 | 1
	for i := 8; i+8 <= len(buf); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(buf[i:], x)
	}
}

// ID returns the id of the frame in buf.
func ID(buf []byte) uint64 { return binary.LittleEndian.Uint64(buf) }

// Checksum is the 64-bit FNV-1a hash of buf: the "detection" of the
// example, work proportional to the frame.
func Checksum(buf []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, b := range buf {
		h ^= uint64(b)
		h *= 1099511628211
	}
	return h
}

// Detections is a small file in the run's private directory, mapped by
// the camera (which publishes a checksum per frame) and by the planner
// (which reads the latest). Every word is read and written atomically;
// the order between a publication and the read that needs it comes from
// the schedule: plan depends on detect.
type Detections struct {
	mem   []byte
	words []uint64 // mem as words: latest, then slots of (id, checksum)
}

const (
	fileName  = "pipeline.shm"
	fileBytes = 4096
	wLatest   = 0 // the id of the latest detection; 0: none yet
	wSlots    = 1 // slots × (id, checksum)
	slots     = 4 // a reader may lag the writer by up to 3 frames
)

// Open maps dir/pipeline.shm, creating dir (mode 0700) and the file
// (mode 0600) if need be.
func Open(dir string) (*Detections, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, fileName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.Truncate(fileBytes); err != nil {
		return nil, err
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, fileBytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", f.Name(), err)
	}
	// The mapping is page-aligned, so its words are 8-byte aligned.
	return &Detections{mem: mem, words: unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), fileBytes/8)}, nil
}

// Reset forgets the detections of an earlier run (the camera calls it
// before it enters the scheduler).
func (d *Detections) Reset() {
	for i := range d.words {
		atomic.StoreUint64(&d.words[i], 0)
	}
}

// Publish records the checksum of frame id (id > 0) and makes it the
// latest.
func (d *Detections) Publish(id, sum uint64) {
	s := wSlots + 2*int(id%slots)
	atomic.StoreUint64(&d.words[s], 0) // a reader of the slot's old frame sees it change
	atomic.StoreUint64(&d.words[s+1], sum)
	atomic.StoreUint64(&d.words[s], id)
	atomic.StoreUint64(&d.words[wLatest], id)
}

// Latest returns the latest detection; ok is false if there is none, or
// if the writer has already reused its slot.
func (d *Detections) Latest() (id, sum uint64, ok bool) {
	id = atomic.LoadUint64(&d.words[wLatest])
	if id == 0 {
		return 0, 0, false
	}
	s := wSlots + 2*int(id%slots)
	before := atomic.LoadUint64(&d.words[s])
	sum = atomic.LoadUint64(&d.words[s+1])
	after := atomic.LoadUint64(&d.words[s])
	return id, sum, before == id && after == id
}

// Close unmaps the file.
func (d *Detections) Close() error {
	d.words = nil
	return syscall.Munmap(d.mem)
}
