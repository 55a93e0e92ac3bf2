package static

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// The protocol between master and clients: each message is a 4-byte
// big-endian length and a JSON object with a "type". A client sends hello,
// then (once started) ready when it is set up, stop requests and its
// result; the master answers hello with refused or start, beats (beat)
// until the start, and may send abort. The start carries the plan and
// the board but not t0: the master writes t0 on the board once every
// client is ready, and the clients' threads wait for it there.
type message struct {
	Type string `json:"type"`
	// hello
	Client string `json:"client,omitempty"`
	// Proto is the client's protocolVersion; 0 (absent) for a client
	// built from a pz older than the field, which the master refuses.
	Proto     int      `json:"proto,omitempty"`
	PID       int      `json:"pid,omitempty"`
	Runnables []string `json:"runnables,omitempty"`
	Resources []string `json:"resources,omitempty"`
	// PlanHash, when the client knows the plan, must be the master's.
	PlanHash string `json:"plan_hash,omitempty"`
	// PlanSource and PlanBody are the client's plan's source and its
	// hash without the source, to tell a refused client whether the plans
	// differ only in how their source's path was spelled.
	PlanSource string `json:"plan_source,omitempty"`
	PlanBody   string `json:"plan_body,omitempty"`
	// refused, abort, stop
	Reason string `json:"reason,omitempty"`
	// start
	Plan   *Plan  `json:"plan,omitempty"`
	Board  string `json:"board,omitempty"`
	Frames int64  `json:"frames,omitempty"`
	// Allocs asks for allocation counts around every run.
	Allocs bool `json:"allocs,omitempty"`
	// Liveness is the master's liveness bound (WithLiveness), in ns
	// (start, beat): a client's default master timeout; once
	// a run is aborted, a client leaves behind, after half of it, a thread
	// stuck in user code, so that its record still reaches the master.
	Liveness int64 `json:"liveness_ns,omitempty"`
	// MasterPID is the master's process id (start, beat), which a
	// client names when the master stops beating or disappears.
	MasterPID int `json:"master_pid,omitempty"`
	// Waiting names the clients the master still waits for (beat), which
	// a joined client waiting for the start says (awaitStart).
	Waiting []string `json:"waiting,omitempty"`
	// result
	Result *clientResult `json:"result,omitempty"`
}

// clientResult is what a client recorded.
type clientResult struct {
	Runnables []RunnableRun `json:"runnables"`
	GC        []GCPeriod    `json:"gc,omitempty"`
	Allocs    []AllocPeriod `json:"allocs,omitempty"`
	Error     string        `json:"error,omitempty"`
}

// Message types.
const (
	msgHello   = "hello"
	msgRefused = "refused"
	msgStart   = "start"
	msgStop    = "stop"
	msgAbort   = "abort"
	msgResult  = "result"
	msgBye     = "bye"
	// msgBeat is the master's beat before the start, when there is no
	// board to beat on yet: it comes every beatEvery of the liveness
	// bound from the loop that waits for the clients, and once as the
	// master accepts a client.
	msgBeat = "beat"
	// msgReady is a client's word, after the start, that it is set up:
	// its records built, its setup's garbage collected, its resource
	// threads started and pinned. The master publishes t0 once every
	// client has said it (Master.clientReady).
	msgReady = "ready"
)

// protocolVersion is the version of the protocol and of the board's
// layout (boardMagic) that a client says in its hello: a master refuses
// a client of another version, naming both, rather than let it fail on
// a message or a board it cannot read. Version 1: beat messages before
// the start, board format pzstm3. Version 2: the client's ready message
// after the start, and t0 on the board only once every client is ready
// (a version 1 client would read t0 as 0 and never send ready).
const protocolVersion = 2

// maxMessage bounds a message's size: a result of 16 runnables keeping
// every row is about 100 MiB of JSON.
const maxMessage = 256 << 20

// errProtocol marks a malformed or out-of-order message.
var errProtocol = errors.New("protocol error")

// decodeMessage parses and checks one message body.
func decodeMessage(b []byte) (*message, error) {
	var m message
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", errProtocol, err)
	}
	switch m.Type {
	case msgHello:
		if m.Client == "" {
			return nil, fmt.Errorf("%w: hello without a client name", errProtocol)
		}
	case msgStart:
		if m.Plan == nil || m.Board == "" {
			return nil, fmt.Errorf("%w: start without a plan or board", errProtocol)
		}
		if h := m.Plan.hash(); h != m.Plan.Hash {
			return nil, fmt.Errorf("%w: start with a plan whose hash does not match", errProtocol)
		}
	case msgResult:
		if m.Result == nil {
			return nil, fmt.Errorf("%w: result without a record", errProtocol)
		}
		for _, r := range m.Result.Runnables {
			if err := r.checkColumns(); err != nil {
				return nil, fmt.Errorf("%w: result: %w", errProtocol, err)
			}
		}
	case msgRefused, msgStop, msgAbort, msgBye, msgBeat, msgReady:
	case "":
		return nil, fmt.Errorf("%w: message without a type", errProtocol)
	default:
		return nil, fmt.Errorf("%w: unknown message type %q", errProtocol, m.Type)
	}
	return &m, nil
}

// A link carries messages one way and the other: a Unix socket between
// processes, channels in one process.
type link interface {
	send(m *message) error
	// sendBy sends m, giving up at deadline (the zero time: never): a
	// sockLink whose peer does not read returns an error that is
	// os.ErrDeadlineExceeded. After an error the stream may hold part
	// of m: the caller closes the link.
	sendBy(m *message, deadline time.Time) error
	// offer sends m unless the other end does not read (its buffer is
	// full, or another message is being written): then it drops m and
	// returns nil at once. Beats go this way, so that a client stopped
	// before the start never blocks its master.
	offer(m *message) error
	recv() (*message, error)
	close() error
}

// sockLink frames messages on a stream connection.
type sockLink struct {
	c   net.Conn
	r   *bufio.Reader
	wmu sync.Mutex
}

func newSockLink(c net.Conn) *sockLink { return &sockLink{c: c, r: bufio.NewReader(c)} }

func (l *sockLink) send(m *message) error { return l.sendBy(m, time.Time{}) }

func (l *sockLink) sendBy(m *message, deadline time.Time) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	frame := append(hdr[:], b...)
	if !deadline.IsZero() {
		if err := l.c.SetWriteDeadline(deadline); err != nil {
			return err
		}
		defer l.c.SetWriteDeadline(time.Time{})
	}
	// On an error part of the frame may have gone out: the stream
	// cannot be read any more, and the caller closes the link (after
	// saying why, so that the close is not taken for the reason).
	_, err = l.c.Write(frame)
	return err
}

// offerWait bounds how long offer waits for room in the socket's
// buffer: a client that reads has room at once.
const offerWait = time.Millisecond

// offerBacklog is how many bytes (as the kernel counts them, with its
// overhead: a beat of about 100 bytes counts for about 1 KiB) may wait
// unread in a connection before offer drops its message: a client that
// has not read that many beats is not reading (stopped), and more would
// only fill the socket's buffer (about 200 KiB), leaving no room for the
// start, abort or refusal that comes next.
const offerBacklog = 8 << 10

func (l *sockLink) offer(m *message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if !l.wmu.TryLock() {
		return nil // a message is being written: the beat is not needed
	}
	defer l.wmu.Unlock()
	if n, ok := unreadBytes(l.c); ok && n > offerBacklog {
		return nil // the peer does not read: drop the beat
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	frame := append(hdr[:], b...)
	if err := l.c.SetWriteDeadline(time.Now().Add(offerWait)); err != nil {
		return err
	}
	n, err := l.c.Write(frame)
	if derr := l.c.SetWriteDeadline(time.Time{}); err == nil {
		err = derr
	}
	switch {
	case err == nil:
		return nil
	case n == 0 && errors.Is(err, os.ErrDeadlineExceeded):
		return nil // the peer does not read: drop the beat
	case n > 0 && n < len(frame):
		// Part of a frame went out: the stream cannot be read any more.
		l.c.Close()
	}
	return err
}

func (l *sockLink) recv() (*message, error) {
	return readMessage(l.r)
}

// readMessage reads one framed message.
func readMessage(r io.Reader) (*message, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > maxMessage {
		return nil, fmt.Errorf("%w: message of %d bytes (at most %d)", errProtocol, n, maxMessage)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return decodeMessage(b)
}

func (l *sockLink) close() error { return l.c.Close() }

// chanLink is one end of an in-process link.
type chanLink struct {
	board   *board // the run's board, shared in process
	in, out chan *message
	done    chan struct{} // closed by either end's close
	once    *sync.Once
	// afterSetup, when not nil, is called by the client's session once
	// it has built what its loop needs, before the loop (RunLocal: a
	// garbage collection once every client is set up).
	afterSetup func()
}

func newChanPair() (a, b *chanLink) {
	x, y := make(chan *message, 16), make(chan *message, 16)
	done := make(chan struct{})
	once := &sync.Once{}
	return &chanLink{in: x, out: y, done: done, once: once}, &chanLink{in: y, out: x, done: done, once: once}
}

func (l *chanLink) send(m *message) error {
	select {
	case l.out <- m:
		return nil
	case <-l.done:
		return net.ErrClosed
	}
}

func (l *chanLink) sendBy(m *message, deadline time.Time) error {
	if deadline.IsZero() {
		return l.send(m)
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case l.out <- m:
		return nil
	case <-l.done:
		return net.ErrClosed
	case <-t.C:
		return fmt.Errorf("sending %s: %w", m.Type, os.ErrDeadlineExceeded)
	}
}

func (l *chanLink) offer(m *message) error {
	select {
	case l.out <- m:
		return nil
	case <-l.done:
		return net.ErrClosed
	default:
		return nil // the other end does not read: drop m
	}
}

func (l *chanLink) recv() (*message, error) {
	select {
	case m := <-l.in:
		return m, nil
	case <-l.done:
		select { // deliver what was sent before the close
		case m := <-l.in:
			return m, nil
		default:
		}
		return nil, io.EOF
	}
}

func (l *chanLink) close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}
