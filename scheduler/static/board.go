package static

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A board is the state every client of a run shares: when the run
// started, when it stops, the master's heartbeat, each client's, each
// runnable's last finished frame, and which of its last frames it
// skipped. In
// one process it is plain memory; across processes it is a file that the
// master creates in its private directory and every client maps. Each
// word is read and written atomically; a runnable's word is written only
// by the client that runs it, so signalling a dependency across
// processes is one store and one load (no system call).
type board struct {
	words    []uint64
	mem      []byte // the mapping, nil in process
	doneBase int    // index of runnable 0's done word
	skipBase int    // index of runnable 0's skip history word
}

// The header's words.
const (
	wMagic     = iota // boardMagic
	wRunnables        // number of runnables
	wClients          // number of clients
	wT0               // start of every hyperepoch's first period, CLOCK_MONOTONIC ns
	wStop             // stop at the first period boundary at or after this time; 0: none
	wAbort            // nonzero: leave at once (a client failed); the reason is in the master
	// wMasterBeat is when the master last showed it makes progress,
	// CLOCK_MONOTONIC ns: it stores it every beatEvery while it watches
	// the run, and the clients leave the run when it grows older than
	// their master timeout (Client.watchMaster).
	wMasterBeat
	wHeader
)

// boardMagic marks a board of this layout ("pzstm3\n"; "pzstm2\n" had no
// master heartbeat).
const boardMagic = 0x707a73746d330a

// done words hold (seq+1)<<1 | skipped, seq being the runnable's frame
// number counted from 0 over the run. A runnable's skip history word has
// bit seq%64 set when it skipped frame seq: a dependent running late
// (a period or more behind) asks about a frame older than the done word's,
// whose skipped bit would be a later frame's.
const skippedBit = 1

// skipWindow is how many frames behind its dependency a runnable may be
// for the skip history to answer for the frame it waits for (the word
// holds 64; the writer may be one frame past the done word it stored).
const skipWindow = 62

func boardWords(runnables, clients int) int { return wHeader + clients + 2*runnables }

func newBoard(runnables, clients int) *board {
	b := &board{words: make([]uint64, boardWords(runnables, clients))}
	b.init(runnables, clients)
	return b
}

func (b *board) init(runnables, clients int) {
	b.doneBase = wHeader + clients
	b.skipBase = b.doneBase + runnables
	atomic.StoreUint64(&b.words[wRunnables], uint64(runnables))
	atomic.StoreUint64(&b.words[wClients], uint64(clients))
	atomic.StoreUint64(&b.words[wMagic], boardMagic)
}

// createBoardFile makes the shared board at path (mode 0600) and maps it.
// A file already there (the board of a master that was killed) is
// removed first, not truncated and reused: a client of that run may
// still map it (a process stopped, resumed later), and its writes, an
// abort among them, must land on its own run's board, not this one.
func createBoardFile(path string, runnables, clients int) (*board, error) {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("static: board: removing the stale %s of an earlier run: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("static: board: %w", err)
	}
	defer f.Close()
	n := boardWords(runnables, clients) * 8
	if err := f.Truncate(int64(n)); err != nil {
		return nil, fmt.Errorf("static: board: %w", err)
	}
	b, err := mapBoard(f, n)
	if err != nil {
		return nil, err
	}
	b.init(runnables, clients)
	return b, nil
}

// boardFormatName names the board format of magic ("pzstm3"), or
// returns "" when magic is not a pz board's ("pzstm" and a digit).
func boardFormatName(magic uint64) string {
	const prefix = 0x707a73746d // "pzstm"
	d := byte(magic >> 8)
	if magic>>16 != prefix || magic&0xff != '\n' || d < '0' || d > '9' {
		return ""
	}
	return "pzstm" + string(rune(d))
}

// openBoardFile maps a board the master made and checks its format and
// shape.
func openBoardFile(path string, runnables, clients int) (*board, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("static: board: %w", err)
	}
	defer f.Close()
	// The format first: a board of another pz has another size too, which
	// would read as another plan.
	var w [8]byte
	if _, err := f.ReadAt(w[:], 0); err != nil {
		return nil, fmt.Errorf("static: board %s: reading its format: %w", path, err)
	}
	if magic := binary.NativeEndian.Uint64(w[:]); magic != boardMagic { // the order the master stored it in
		if name := boardFormatName(magic); name != "" {
			return nil, fmt.Errorf("static: board %s has format %s, and this client reads %s: the master and this client were built from different versions of pz; rebuild the client and the master from the same pz", path, name, boardFormatName(boardMagic))
		}
		return nil, fmt.Errorf("static: board %s is not a pz board (its first word is %#x; this client reads format %s)", path, magic, boardFormatName(boardMagic))
	}
	n := boardWords(runnables, clients) * 8
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("static: board: %w", err)
	}
	if st.Size() != int64(n) {
		return nil, fmt.Errorf("static: board %s has %d bytes, want %d: the master runs another plan", path, st.Size(), n)
	}
	b, err := mapBoard(f, n)
	if err != nil {
		return nil, err
	}
	if atomic.LoadUint64(&b.words[wMagic]) != boardMagic || b.load(wRunnables) != uint64(runnables) || b.load(wClients) != uint64(clients) {
		b.close()
		return nil, fmt.Errorf("static: board %s does not match the plan", path)
	}
	return b, nil
}

func mapBoard(f *os.File, n int) (*board, error) {
	mem, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("static: mapping the board: %w", err)
	}
	// The mapping is page-aligned, so its words are 8-byte aligned.
	words := unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), n/8)
	b := &board{words: words, mem: mem}
	b.doneBase = wHeader + int(b.load(wClients))
	b.skipBase = b.doneBase + int(b.load(wRunnables))
	return b, nil
}

func (b *board) close() {
	if b.mem != nil {
		unix.Munmap(b.mem)
		b.mem, b.words = nil, nil
	}
}

func (b *board) load(i int) uint64     { return atomic.LoadUint64(&b.words[i]) }
func (b *board) store(i int, v uint64) { atomic.StoreUint64(&b.words[i], v) }

func (b *board) t0() int64     { return int64(b.load(wT0)) }
func (b *board) aborted() bool { return b.load(wAbort) != 0 }

// stopTime returns the requested stop time, or 0.
func (b *board) stopTime() int64 { return int64(b.load(wStop)) }

// requestStop asks every client to stop at the first period boundary at
// or after t; an earlier request wins.
func (b *board) requestStop(t int64) {
	for {
		cur := b.load(wStop)
		if cur != 0 && int64(cur) <= t {
			return
		}
		if atomic.CompareAndSwapUint64(&b.words[wStop], cur, uint64(t)) {
			return
		}
	}
}

func (b *board) abort() { b.store(wAbort, 1) }

// beat publishes that the master is alive at now (CLOCK_MONOTONIC ns).
func (b *board) beat(now int64) { b.store(wMasterBeat, uint64(now)) }

// masterBeat returns the master's last beat (CLOCK_MONOTONIC ns).
func (b *board) masterBeat() int64 { return int64(b.load(wMasterBeat)) }

func (b *board) heartbeatWord(client int) int { return wHeader + client }

func (b *board) doneWord(runnable int) int { return b.doneBase + runnable }

// finish publishes that runnable ended frame seq, skipped or not: the
// skip history first, then the done word, which waiters poll. Only the
// runnable's resource thread writes either.
func (b *board) finish(runnable int, seq int64, skipped bool) {
	h := b.skipBase + runnable
	m := b.load(h)
	v := uint64(seq+1) << 1
	if skipped {
		m |= skipBit(seq)
		v |= skippedBit
	} else {
		m &^= skipBit(seq)
	}
	b.store(h, m)
	b.store(b.doneWord(runnable), v)
}

// abandon publishes that runnable gives up its frames from to to (to >=
// from), none of them run: a stop came while its client was behind the
// plan (executor.abandon). They read as ended and skipped, so that what
// waits for one of them goes on. Only the runnable's resource thread
// writes, as for finish.
func (b *board) abandon(runnable int, from, to int64) {
	h := b.skipBase + runnable
	m := b.load(h)
	if to-from >= 63 {
		m = ^uint64(0)
	} else {
		for s := from; s <= to; s++ {
			m |= skipBit(s)
		}
	}
	b.store(h, m)
	b.store(b.doneWord(runnable), uint64(to+1)<<1|skippedBit)
}

// frameDone reports whether runnable has ended frame seq and, if so,
// whether it skipped it: from the done word when that is frame seq's,
// else from the skip history (or, a dependent more than skipWindow
// frames behind, the done word's latest frame).
func (b *board) frameDone(runnable int, seq int64) (done, skipped bool) {
	w := b.doneWord(runnable)
	v := b.load(w)
	last := int64(v>>1) - 1 // the last frame ended, -1 for none
	if last < seq {
		return false, false
	}
	if last == seq {
		return true, v&skippedBit != 0
	}
	m := b.load(b.skipBase + runnable)
	// The history holds frame seq's bit unless the writer has reached
	// seq+64; it writes a frame's bit before its done word, so a done
	// word still within skipWindow after reading m says m was not
	// overwritten yet.
	if v = b.load(w); int64(v>>1)-1-seq <= skipWindow {
		return true, m&skipBit(seq) != 0
	}
	return true, v&skippedBit != 0
}

// skipBit is frame seq's bit in a skip history word.
func skipBit(seq int64) uint64 { return 1 << (uint64(seq) % 64) }
