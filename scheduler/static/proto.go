package static

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// The protocol between master and clients: each message is a 4-byte
// big-endian length and a JSON object with a "type". A client sends hello,
// then (once started) stop requests and its result; the master answers
// hello with refused or start, and may send abort.
type message struct {
	Type string `json:"type"`
	// hello
	Client    string   `json:"client,omitempty"`
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
	// Liveness is the master's liveness bound (WithLiveness), in ns: once
	// a run is aborted, a client leaves behind, after half of it, a thread
	// stuck in user code, so that its record still reaches the master.
	Liveness int64 `json:"liveness_ns,omitempty"`
	// MasterPID is the master's process id, which a client names when
	// the master stops beating or disappears.
	MasterPID int `json:"master_pid,omitempty"`
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
)

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
	case msgRefused, msgStop, msgAbort, msgBye:
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

func (l *sockLink) send(m *message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	if _, err := l.c.Write(append(hdr[:], b...)); err != nil {
		return err
	}
	return nil
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
