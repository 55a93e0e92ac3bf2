package static

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pzgo/pz/internal/plural"
)

// Errors of a run.
var (
	// ErrRefused is returned by EnterScheduler when the master refuses
	// the client (a name the plan lacks, a runnable it misses, a client
	// already in).
	ErrRefused = errors.New("static: refused by the master")
	// ErrAborted is returned when a run ends early because a client died,
	// stopped answering or broke the protocol, or (to a client, with
	// ErrMasterLost) because the master died or stopped beating.
	ErrAborted = errors.New("static: run aborted")
)

// Options of a run (master side, and RunLocal).
type options struct {
	frames     int64
	dir        string
	liveness   time.Duration
	startDelay time.Duration
	setupWait  time.Duration
	log        func(string)
	signals    bool
	allocs     bool
}

// An Option configures a Master or RunLocal.
type Option func(*options)

// WithFrames stops the run after n periods of every hyperepoch; 0 (the
// default) runs until a stop (ExitScheduler, SIGINT, SIGTERM).
func WithFrames(n int64) Option { return func(o *options) { o.frames = n } }

// WithDir sets the directory of the master's socket; by default
// $PZ_STM_DIR, else $XDG_RUNTIME_DIR/pz-stm, else DefaultDir's pz-stm-UID in
// /dev/shm (or the temporary directory).
func WithDir(dir string) Option { return func(o *options) { o.dir = dir } }

// WithLiveness sets how far behind its plan a runnable may fall before
// the master declares its client dead and aborts the run; default 1s
// (and at least two periods). It also bounds how long a message of the
// master (the start, an abort) may wait for a client that does not read
// its socket: that client fails the run the same way.
func WithLiveness(d time.Duration) Option { return func(o *options) { o.liveness = d } }

// WithStartDelay sets how long after the last client is ready (set up,
// its resource threads started and pinned: WithSetupTimeout) the first
// period starts; default 50ms (and at least one period). A stop during
// the setups or the delay (ExitScheduler, a signal, a context's end)
// ends the run at once, with no frames run.
func WithStartDelay(d time.Duration) Option { return func(o *options) { o.startDelay = d } }

// WithSetupTimeout bounds how long the master waits, once it has sent
// the start, for every client to be ready: its records built, its
// setup's garbage collected, its resource threads started and pinned to
// their cores. The first period (t0) starts the start delay after the
// last one is ready, so that no client's setup is counted inside the
// plan. A client not ready within the bound (a process stopped or
// starved in its setup) aborts the run: ErrAborted, naming it. Default
// 10s, and at least the liveness bound.
func WithSetupTimeout(d time.Duration) Option { return func(o *options) { o.setupWait = d } }

// WithAllocationCounts reads the heap's allocation counters around every
// run, so that the run record names the runnables that allocate. Each
// read costs from a few hundred ns to tens of µs (it synchronizes with
// the process's other threads), which lands on the runs' start times: a
// diagnostic mode. Without it, each client records its allocations per
// period only.
func WithAllocationCounts() Option { return func(o *options) { o.allocs = true } }

// WithSignals(false) leaves SIGINT and SIGTERM to the caller, who stops
// the run through the context instead. By default RunLocal stops the run
// at a period boundary on either (a Master's Run catches no signals: its
// caller ends ctx).
func WithSignals(on bool) Option { return func(o *options) { o.signals = on } }

// WithLog receives the master's messages (clients joining, refusals,
// faults); by default they go nowhere.
func WithLog(f func(msg string)) Option { return func(o *options) { o.log = f } }

func buildOptions(opts []Option) options {
	o := options{liveness: time.Second, startDelay: 50 * time.Millisecond, setupWait: defaultSetupWait, signals: true}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// DefaultDir returns the socket directory used when none is given:
// $PZ_STM_DIR, else $XDG_RUNTIME_DIR/pz-stm, else pz-stm-UID in
// /dev/shm (memory: the board file that the master maps there is never
// written back to a disk, as one in a disk-backed /tmp would be, a
// latency a real-time loop does not need) or, without it, the temporary
// directory.
func DefaultDir(getenv func(string) string) string {
	if d := getenv("PZ_STM_DIR"); d != "" {
		return d
	}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "pz-stm")
	}
	base := os.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	return filepath.Join(base, fmt.Sprintf("pz-stm-%d", os.Getuid()))
}

const (
	sockName  = "master.sock"
	boardName = "board"
)

// defaultSetupWait is WithSetupTimeout's default: a client's setup takes
// tens of ms, a few hundred on a loaded machine (pinning a thread to a
// busy core alone took up to 400 ms).
const defaultSetupWait = 10 * time.Second

// A Master runs a plan: it waits for every client, starts them on the
// same period boundary, watches them and gathers their records.
type Master struct {
	plan *Plan
	opts options
	clk  clock

	mu      sync.Mutex
	joined  map[string]*member // by client name
	started bool
	startCh chan struct{} // closed when every client is in
	b       *board
	bpath   string // the board's file (or localBoard)
	// startedAt is when the start went out (CLOCK_MONOTONIC ns): the
	// clients' setups are bounded from it (WithSetupTimeout).
	startedAt int64
	// t0 is the first period's start, 0 until every client is ready
	// (ready); under mu, as it is set by the goroutine that serves the
	// last client ready.
	t0      int64
	ready   int    // clients ready
	stopped string // why the run ended; first reason wins
	abortW  string // the abort's reason; "" if none
	results map[string]*clientResult
	pids    map[string]int
	left    chan string // a member that ended (result or gone)
	closed  bool        // the run is over: links and board closed
	ended   string      // why the master ended before the start; "" if it did not
}

// member is a joined client.
type member struct {
	name string
	pid  int
	l    link
	out  *outbox // the master's messages to it, written by serve's writer
	done bool
	// ready: the client said it was set up (msgReady).
	ready bool
}

// NewMaster checks the options and prepares a run of plan.
func NewMaster(plan *Plan, opts ...Option) (*Master, error) {
	if plan == nil || len(plan.Clients) == 0 {
		return nil, fmt.Errorf("static: NewMaster needs a compiled plan with clients")
	}
	// A plan compiled before the compiler refused clients without
	// runnables may list one; the master would wait for it forever.
	runs := plan.Runnables()
	for _, c := range plan.Clients {
		if !slices.ContainsFunc(runs, func(r PlacedRunnable) bool { return r.Client == c }) {
			return nil, fmt.Errorf("static: client %q of the plan has no runnables, and the master would wait for it forever; give it one or remove it from clients, and compile the schedule again", c)
		}
	}
	o := buildOptions(opts)
	if o.frames < 0 {
		return nil, fmt.Errorf("static: frames must be 0 (no limit) or more, got %d", o.frames)
	}
	if o.liveness < 0 {
		return nil, fmt.Errorf("static: WithLiveness(%v): want a duration >= 0 (at least two periods are used)", o.liveness)
	}
	if o.startDelay < 0 {
		return nil, fmt.Errorf("static: WithStartDelay(%v): want a duration >= 0 (at least one period is used)", o.startDelay)
	}
	if o.setupWait <= 0 {
		return nil, fmt.Errorf("static: WithSetupTimeout(%v): want a duration > 0 (at least the liveness bound is used)", o.setupWait)
	}
	var longest time.Duration
	for _, h := range plan.Hyperepochs {
		// A plan file compiled before the verifier bounded periods.
		if h.Period > MaxPeriod {
			return nil, fmt.Errorf("static: hyperepoch %q of the plan has a period of %s, longer than the longest a run can keep time over, %s (MaxPeriod); shorten it and compile the schedule again", h.Name, h.Period, fmtMaxPeriod)
		}
		longest = max(longest, h.Period)
	}
	o.liveness = time.Duration(max(int64(o.liveness), satMul(2, int64(longest))))
	o.startDelay = max(o.startDelay, longest)
	o.setupWait = max(o.setupWait, o.liveness)
	return &Master{
		plan: plan, opts: o, clk: newClock(),
		joined: map[string]*member{}, startCh: make(chan struct{}),
		results: map[string]*clientResult{}, pids: map[string]int{}, left: make(chan string, len(plan.Clients)),
	}, nil
}

func (m *Master) logf(format string, args ...any) {
	if m.opts.log != nil {
		m.opts.log(fmt.Sprintf(format, args...))
	}
}

// Run listens on the socket in the run's directory, runs the plan with
// the clients that connect (in any order), and returns what they
// recorded. It returns when every client has ended: after the frame
// limit, a stop request, or ctx's end (a graceful stop at the next period
// boundary); the error is ErrAborted when a client failed.
func (m *Master) Run(ctx context.Context) (*Run, error) {
	dir := m.opts.dir
	if dir == "" {
		dir = DefaultDir(os.Getenv)
	}
	if err := privateDir(dir); err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, sockName)
	if c, err := net.Dial("unix", sock); err == nil {
		c.Close()
		return nil, fmt.Errorf("static: a master already listens on %s; stop it or use another directory", sock)
	}
	os.Remove(sock) // a stale socket of a master that died
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("static: listening: %w", err)
	}
	defer os.Remove(sock)
	boardPath := filepath.Join(dir, boardName)
	m.logf("master: waiting for %s on %s", clientsNamed(m.plan.Clients), sock)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			uid, pid, err := peerUID(c)
			if err != nil || uid != os.Getuid() {
				m.logf("master: refused a connection from uid %d pid %d: only user %d may join (%v)", uid, pid, os.Getuid(), err)
				// On a goroutine of its own: a peer that does not read
				// must not hold up the others' connections.
				wg.Add(1)
				go func() {
					defer wg.Done()
					newSockLink(c).sendBy(&message{Type: msgRefused, Reason: fmt.Sprintf("this master runs as user %d; connect as that user", os.Getuid())}, time.Now().Add(m.sendWait()))
					c.Close()
				}()
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				m.serve(ctx, newSockLink(c), pid, func() (*board, string, error) {
					b, err := createBoardFile(boardPath, len(m.plan.Runnables()), len(m.plan.Clients))
					return b, boardPath, err
				})
			}()
		}
	}()
	run, err := m.supervise(ctx)
	ln.Close()
	m.closeAll()
	os.Remove(boardPath)
	return run, err
}

// privateDir makes dir (mode 0700) or checks that it is this user's and
// closed to others.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("static: socket directory: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("static: socket directory: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("static: socket directory %s has mode %#o; others may enter it: chmod 700 %s or choose another directory", dir, st.Mode().Perm(), dir)
	}
	if uid, ok := ownerUID(st); ok && uid != os.Getuid() {
		return fmt.Errorf("static: socket directory %s belongs to user %d, not %d; choose another directory", dir, uid, os.Getuid())
	}
	return nil
}

// serve handles one client's link from hello to its end. Once the
// client has joined, the master's messages to it go through its outbox,
// which a writer goroutine that serve owns writes (outbox.run): nothing
// of the master waits for the client's socket.
func (m *Master) serve(ctx context.Context, l link, pid int, mkBoard func() (*board, string, error)) {
	defer l.close()
	// A refusal is written here, on the client's own goroutine, within
	// the same bound as the outbox's writes.
	refuse := func(why string) { l.sendBy(&message{Type: msgRefused, Reason: why}, time.Now().Add(m.sendWait())) }
	hello, err := l.recv()
	if err != nil {
		if !errors.Is(err, io.EOF) {
			m.logf("master: a client (pid %d) sent a bad first message and was disconnected: %v", pid, err)
		}
		return
	}
	if hello.Type != msgHello {
		m.logf("master: a client (pid %d) sent %q before hello and was disconnected", pid, hello.Type)
		refuse(fmt.Sprintf("the first message must be hello, not %s", hello.Type))
		return
	}
	if hello.PID != 0 {
		pid = hello.PID
	}
	name := hello.Client
	if hello.Proto != protocolVersion {
		why := versionMismatch(hello.Proto)
		m.logf("master: refused client %q (pid %d): %s", name, pid, why)
		refuse(why)
		return
	}
	out := newOutbox()
	if err := m.join(name, hello, pid, l, out); err != nil {
		m.logf("master: refused client %q (pid %d): %v", name, pid, err)
		refuse(err.Error())
		return
	}
	go out.run(l, m.sendWait(), func(msg *message, err error) {
		m.sendFailed(name, pid, msg, err)
		l.close() // the stream may hold part of msg; and recv below ends
	})
	defer func() {
		out.close()
		<-out.done // within sendWait: what was put goes out first
	}()
	if m.allIn() {
		m.start(mkBoard)
	}
	started := false
	for {
		msg, err := l.recv()
		m.mu.Lock()
		mem := m.joined[name]
		running := m.started
		m.mu.Unlock()
		if running && !started {
			started = true
		}
		if err != nil {
			if !running {
				m.mu.Lock()
				delete(m.joined, name)
				ended := m.ended != "" || m.closed
				m.mu.Unlock()
				if !ended { // else the master closed the link as it ended
					m.logf("master: client %s left before the start; waiting for it again", name)
				}
				return
			}
			if !mem.done {
				why := "disconnected"
				if !errors.Is(err, io.EOF) {
					why = err.Error()
				}
				m.fail(fmt.Sprintf("client %s (pid %d) %s mid-run", name, pid, why))
				m.finish(name, nil)
			}
			return
		}
		switch msg.Type {
		case msgStop:
			if !running {
				m.fail(fmt.Sprintf("client %s sent stop before the start and was disconnected", name))
				return
			}
			m.requestStop(msg.Reason)
		case msgReady:
			if !running {
				m.fail(fmt.Sprintf("client %s sent ready before the start and was disconnected", name))
				return
			}
			m.clientReady(name)
		case msgResult:
			if !running {
				m.logf("master: client %s sent a result before the start and was disconnected", name)
				m.mu.Lock()
				delete(m.joined, name)
				m.mu.Unlock()
				return
			}
			// Before the bye: a client waits for the abort's reason only
			// until then.
			m.checkBoardAbort()
			out.put(&message{Type: msgBye})
			m.finish(name, msg.Result)
		default:
			m.fail(fmt.Sprintf("client %s sent an unexpected %s message and was disconnected", name, msg.Type))
			m.finish(name, nil)
			return
		}
	}
}

// join registers a client, checking it against the plan; out is its
// outbox.
func (m *Master) join(name string, h *message, pid int, l link, out *outbox) error {
	if h.PlanHash != "" && h.PlanHash != m.plan.Hash {
		if h.PlanBody != "" && h.PlanBody == m.plan.bodyHash() {
			// The source's path is part of the hash.
			return fmt.Errorf("the client runs plan %s and the master plan %s, which differ only in their source's path: the client's %s, the master's %s; it is one schedule: give both the same .stm file, or the same path", h.PlanHash, m.plan.Hash, h.PlanSource, m.plan.Source)
		}
		from := ""
		if h.PlanSource != "" {
			from = " (" + h.PlanSource + ")"
		}
		return fmt.Errorf("the client runs plan %s%s and the master plan %s (%s): compile one schedule for both", h.PlanHash, from, m.plan.Hash, m.plan.Source)
	}
	if err := m.plan.CheckClient(name); err != nil {
		return err
	}
	var want []string
	gpus := map[string]bool{}
	for _, r := range m.plan.Runnables() {
		if r.Client != name {
			continue
		}
		want = append(want, r.Name)
		if r.Submitter != "" {
			gpus[r.Resource] = true
		}
	}
	owner := map[string]string{}
	for _, r := range m.plan.Runnables() {
		owner[r.Name] = r.Client
	}
	var unknown, missing []string
	for _, r := range h.Runnables {
		if slices.Contains(want, r) {
			continue
		}
		// Say whose it is, or what it likely misspells.
		if c, ok := owner[r]; ok {
			r += " (the plan gives it to client " + c + ")"
		} else if hint := closest(r, want); hint != "" {
			r += fmt.Sprintf(" (did you mean %q?)", hint)
		}
		unknown = append(unknown, r)
	}
	for _, r := range want {
		if !slices.Contains(h.Runnables, r) {
			missing = append(missing, r)
		}
	}
	var problems []string
	if len(unknown) > 0 {
		problems = append(problems, fmt.Sprintf("it registered %s, which the plan does not give client %s", strings.Join(unknown, ", "), name))
	}
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("it did not register %s (call Runnable for each)", strings.Join(missing, ", ")))
	}
	for _, res := range sortedKeys(gpus) {
		if !slices.Contains(h.Resources, res) {
			problems = append(problems, fmt.Sprintf("it did not give the stream %s (call Resource)", res))
		}
	}
	for _, res := range h.Resources {
		if !gpus[res] {
			problems = append(problems, fmt.Sprintf("it gave resource %s, which none of its runnables uses", res))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return fmt.Errorf("the run has already started")
	}
	if m.ended != "" {
		return errors.New(m.ended)
	}
	if prev := m.joined[name]; prev != nil {
		return fmt.Errorf("client %s is already in (pid %d)", name, prev.pid)
	}
	m.joined[name] = &member{name: name, pid: pid, l: l, out: out}
	m.pids[name] = pid
	// The client's watch of the master starts with this beat, before the
	// log line: whoever reads the line finds the client watching.
	l.offer(m.beatMessage())
	m.logf("master: client %s joined (pid %d)", name, pid)
	return nil
}

// versionMismatch says why a client whose hello carries protocol
// version proto is refused.
func versionMismatch(proto int) string {
	older := "older"
	if proto > protocolVersion {
		older = "newer"
	}
	client := fmt.Sprintf("protocol version %d", proto)
	if proto == 0 {
		client = "no protocol version (board format pzstm3 or older)"
	}
	return fmt.Sprintf("the client was built from a pz %s than the master's: its hello carries %s, the master speaks protocol version %d (board format %s); rebuild the client and the master from the same pz", older, client, protocolVersion, boardFormatName(boardMagic))
}

// beatMessage is the master's beat before the start, naming the
// clients that have not joined; m.mu is held.
func (m *Master) beatMessage() *message {
	return &message{Type: msgBeat, Liveness: int64(m.opts.liveness), MasterPID: os.Getpid(), Waiting: m.missing()}
}

// missing returns the plan's clients that have not joined; m.mu is held.
func (m *Master) missing() []string {
	var out []string
	for _, c := range m.plan.Clients {
		if m.joined[c] == nil {
			out = append(out, c)
		}
	}
	return out
}

// beatWaiting beats to every client that has joined, while the master
// waits for the others: before the start there is no board to beat on.
// It skips a client that does not read (link.offer), so that a stopped
// client cannot block the loop that calls it.
func (m *Master) beatWaiting() {
	m.mu.Lock()
	var links []link
	if !m.started && m.ended == "" && !m.closed {
		for _, mem := range m.joined {
			links = append(links, mem.l)
		}
	}
	beat := m.beatMessage()
	m.mu.Unlock()
	for _, l := range links {
		l.offer(beat)
	}
}

func (m *Master) allIn() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.joined) == len(m.plan.Clients) && !m.started
}

// start makes the board and tells every client when the first period
// starts.
func (m *Master) start(mkBoard func() (*board, string, error)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started || m.ended != "" {
		return
	}
	b, path, err := mkBoard()
	if err != nil {
		m.stopped = err.Error()
		m.abortW = err.Error()
		for _, mem := range m.joined {
			mem.out.put(&message{Type: msgRefused, Reason: err.Error()})
		}
		close(m.startCh)
		m.started = true
		return
	}
	m.b, m.bpath = b, path
	now := m.clk.now()
	// t0 stays 0 on the board until every client is ready (clientReady):
	// the clients' setups are not the plan's.
	m.startedAt = now
	b.beat(now) // the clients watch it from the start message on
	m.started = true
	// Put, not written: a client that does not read (stopped) must not
	// hold up the others' start, nor the master (outbox).
	start := &message{Type: msgStart, Plan: m.plan, Board: path, Frames: m.opts.frames, Allocs: m.opts.allocs, Liveness: int64(m.opts.liveness), MasterPID: os.Getpid()}
	for _, mem := range m.joined {
		mem.out.put(start)
	}
	m.logf("master: every client is in; the first period starts %s after the last is set up", m.opts.startDelay)
	close(m.startCh)
}

// clientReady records that client name is set up (its records built,
// its resource threads started and pinned: msgReady). Once every client
// is, it publishes t0, the start delay from now, on the board, where the
// clients' threads wait for it, unless the run was stopped or aborted
// meanwhile (its clients then end with no frames).
func (m *Master) clientReady(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mem := m.joined[name]
	if mem == nil || mem.ready {
		return
	}
	mem.ready = true
	m.ready++
	if m.ready < len(m.plan.Clients) || m.t0 != 0 || m.b == nil || m.closed || m.stopped != "" || m.abortW != "" || m.b.stopTime() != 0 {
		return
	}
	now := m.clk.now()
	m.t0 = max(satAdd(now, int64(m.opts.startDelay)), 1) // 0 is "not yet"
	m.b.store(wT0, uint64(m.t0))
	m.logf("master: every client is set up (%s after the start); the first period starts in %s", time.Duration(now-m.startedAt).Round(time.Millisecond), m.opts.startDelay)
}

// startTime returns t0, 0 while the clients set up.
func (m *Master) startTime() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t0
}

// notReady names the clients not ready the setup bound after the start
// (WithSetupTimeout), or returns "".
func (m *Master) notReady() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.b == nil || m.ready == len(m.plan.Clients) {
		return ""
	}
	now := m.clk.now()
	if now-m.startedAt <= int64(m.opts.setupWait) {
		return ""
	}
	var late []string
	for _, c := range m.plan.Clients {
		if mem := m.joined[c]; mem != nil && !mem.ready {
			late = append(late, fmt.Sprintf("%s (pid %d)", c, mem.pid))
		}
	}
	if len(late) == 0 {
		return ""
	}
	who := "client " + late[0] + " was"
	if len(late) > 1 {
		who = "clients " + strings.Join(late, ", ") + " were"
	}
	return fmt.Sprintf("%s not ready %s after the start (the setup bound, WithSetupTimeout): it did not finish building its records or starting and pinning its resource threads", who, m.opts.setupWait)
}

func (m *Master) abortReason() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.abortW
}

// clientAskedStop is the reason a stop is given when the board shows a
// client's stop request before the client's message saying why.
const clientAskedStop = "a client asked to stop"

// requestStop asks for a graceful stop at the next period boundary (or,
// during the start delay, before the first period, at once). It returns
// false, doing nothing, before the start (or when the start
// failed): there is no board to stop yet.
func (m *Master) requestStop(reason string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.b == nil {
		return false
	}
	if m.closed {
		return true
	}
	now := m.clk.now()
	if m.stopped == clientAskedStop && reason != clientAskedStop {
		// The board showed the client's stop before its message, with
		// the reason, arrived: say the reason.
		m.stopped = reason
		m.logf("master: the stop was asked for: %s", reason)
	}
	// The board first, then the log line: whoever reads the line (a
	// test's log hook, an operator) finds the stop published to the
	// clients already.
	m.b.requestStop(now)
	if m.stopped == "" {
		m.stopped = reason
		// During the setups and the start delay the clients leave at
		// once (executor.awaitT0, executor.waitUntil).
		when := "at the next period boundary"
		if m.t0 == 0 || now < m.t0 {
			when = "before the first period"
		}
		m.logf("master: stopping %s: %s", when, reason)
	}
	return true
}

// fail aborts the run: every client leaves at once.
func (m *Master) fail(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.abortW != "" || m.closed {
		return
	}
	m.abortW = reason
	if m.stopped == "" {
		m.stopped = reason
	}
	m.logf("master: aborting the run: %s", reason)
	if m.b != nil {
		m.b.abort()
	}
	for _, mem := range m.joined {
		if !mem.done {
			mem.out.put(&message{Type: msgAbort, Reason: reason})
		}
	}
}

// checkBoardAbort aborts the run, saying so, when the board's abort word
// is set but the master did not set it: the clients leave on that word,
// and the run would otherwise end with their failures and no reason, the
// master reporting the frame limit. Only a process outside the run
// writes it so (a client of an earlier run on the same directory still
// mapping its board, or another program).
func (m *Master) checkBoardAbort() {
	m.mu.Lock()
	foreign := m.b != nil && !m.closed && m.abortW == "" && m.b.aborted()
	path := m.bpath
	m.mu.Unlock()
	if foreign {
		m.fail(fmt.Sprintf("the run's board (%s) was marked aborted by a process other than its master or clients (one mapping the board from outside the run)", path))
	}
}

func (m *Master) finish(name string, r *clientResult) {
	m.mu.Lock()
	mem := m.joined[name]
	if mem == nil || mem.done {
		m.mu.Unlock()
		return
	}
	mem.done = true
	if r != nil {
		m.results[name] = r
	}
	m.mu.Unlock()
	m.left <- name
}

// closeAll ends the run: it closes the board, lets each client's
// outbox write what was put in it (a bye, an abort: each writer gives up
// on a client that does not read within sendWait, so this waits at
// most about that long), then closes the links.
func (m *Master) closeAll() {
	m.mu.Lock()
	m.closed = true
	mems := make([]*member, 0, len(m.joined))
	for _, mem := range m.joined {
		mems = append(mems, mem)
	}
	if m.b != nil {
		m.b.close()
	}
	m.mu.Unlock()
	for _, mem := range mems {
		mem.out.close()
	}
	for _, mem := range mems {
		<-mem.out.done
		mem.l.close()
	}
}

// supervise waits for the start, watches the run and gathers results.
func (m *Master) supervise(ctx context.Context) (*Run, error) {
	waitLog := time.NewTicker(5 * time.Second)
	defer waitLog.Stop()
	// The clients that have joined watch this loop's beats: it is the
	// one that goes round while the master waits (for clients that have
	// not started yet, as long as it takes).
	waitBeat := time.NewTicker(waitBeatEvery(m.opts.liveness))
	defer waitBeat.Stop()
	for waiting := true; waiting; {
		select {
		case <-m.startCh:
			waiting = false
		case <-waitBeat.C:
			m.beatWaiting()
		case <-waitLog.C:
			m.mu.Lock()
			missing := m.missing()
			m.mu.Unlock()
			m.logf("master: still waiting for %s", clientsNamed(missing))
		case <-ctx.Done():
			m.mu.Lock()
			started := m.started
			if !started {
				// Tell the clients that have joined why the master
				// ends, and refuse any that comes now.
				m.ended = fmt.Sprintf("the master was stopped before the run started (%v)", context.Cause(ctx))
				for _, mem := range m.joined {
					mem.out.put(&message{Type: msgAbort, Reason: m.ended})
				}
			}
			m.mu.Unlock()
			if !started {
				return nil, fmt.Errorf("static: the run did not start: %w", context.Cause(ctx))
			}
			<-m.startCh // being closed by start: go on, and stop at once
			waiting = false
		}
	}
	if m.b == nil {
		return nil, fmt.Errorf("%w: %s", ErrAborted, m.abortW)
	}
	all := m.plan.Runnables()
	tick := time.NewTicker(beatEvery(m.opts.liveness))
	defer tick.Stop()
	remaining := len(m.plan.Clients)
	ctxDone := ctx.Done()
	progress := time.NewTicker(progressEvery)
	defer progress.Stop()
	for remaining > 0 {
		select {
		case <-progress.C:
			if t0 := m.startTime(); t0 != 0 && m.clk.now()-t0 >= 0 {
				el := m.clk.now() - t0
				m.logf("master: %s", progressLine(m.plan.Hyperepochs, el, m.opts.frames))
			}
		case <-m.left:
			remaining--
		case <-ctxDone:
			ctxDone = nil
			m.requestStop("the master was stopped (" + context.Cause(ctx).Error() + ")")
		case <-tick.C:
			// The beat first: it says that this loop, which watches the
			// clients, goes round.
			m.b.beat(m.clk.now())
			if why := m.notReady(); why != "" {
				m.fail(why)
			}
			if why := m.behind(all); why != "" {
				m.fail(why)
			}
			m.checkBoardAbort()
			if m.b.stopTime() != 0 {
				m.requestStop(clientAskedStop)
			}
		}
		if m.abortReason() != "" && remaining > 0 {
			// Dead clients never report: give the others the bound to
			// leave, then end.
			if !m.drain(&remaining, tick.C) {
				break
			}
		}
	}
	return m.collect(all)
}

// progressLine says which period the run is at, elapsed ns after its
// start: "period 998 of 1000" with one hyperepoch, and each
// hyperepoch's by name with several, which count their periods apart
// ("periods: main 2994, slow 998", "..., of 1000 each" with a frame
// limit, every hyperepoch running that many).
func progressLine(hs []PlanHyperepoch, elapsed int64, frames int64) string {
	of := ""
	if frames > 0 {
		of = fmt.Sprintf(" of %d", frames)
	}
	if len(hs) == 1 {
		return fmt.Sprintf("period %d%s", elapsed/max(int64(hs[0].Period), 1), of)
	}
	parts := make([]string, len(hs))
	for i, h := range hs {
		n := elapsed / max(int64(h.Period), 1)
		if frames > 0 {
			n = min(n, frames) // a shorter hyperepoch is done first
		}
		parts[i] = fmt.Sprintf("%s %d", h.Name, n)
	}
	if of != "" {
		of = "," + of + " each"
	}
	return "periods: " + strings.Join(parts, ", ") + of
}

// progressEvery is how often the master logs the period it is at.
const progressEvery = 5 * time.Second

// drain waits for the clients after an abort, for at most the liveness
// bound, beating on every tick meanwhile (a client still in the run must
// not take the master for lost); false if some never ended.
func (m *Master) drain(remaining *int, tick <-chan time.Time) bool {
	deadline := time.NewTimer(m.opts.liveness)
	defer deadline.Stop()
	for *remaining > 0 {
		select {
		case <-m.left:
			*remaining--
		case <-tick:
			m.b.beat(m.clk.now())
		case <-deadline.C:
			return false
		}
	}
	return true
}

// behind names a runnable whose frames lag its plan by more than the
// liveness bound, or returns "".
func (m *Master) behind(all []PlacedRunnable) string {
	t0 := m.startTime()
	if t0 == 0 {
		return "" // the clients set up: notReady bounds them
	}
	now := m.clk.now()
	stop := m.b.stopTime()
	for i, r := range all {
		h := m.plan.Hyperepochs[r.Hyperepoch]
		ep := h.Epochs[r.Epoch]
		next := int64(m.b.load(m.b.doneWord(i)) >> 1) // the first frame not finished
		k, f := next/r.PeriodFrames, next%r.PeriodFrames-r.FrameBase
		if f < 0 || f >= int64(ep.Frames) {
			continue // a seq of another epoch: not this runnable's
		}
		if m.opts.frames > 0 && k >= m.opts.frames {
			continue
		}
		// Saturating: a run's times stay far below the int64 limit
		// (MaxPeriod), but a wrapped sum would read as far behind.
		pstart := satAdd(t0, satMul(k, int64(h.Period)))
		if stop != 0 && pstart >= stop {
			continue
		}
		due := satAdd(satAdd(pstart, int64(ep.Offset)), satAdd(satMul(f, int64(ep.Period)), int64(r.Deadline())))
		if stop != 0 {
			// After a stop, a client behind the plan ends the period
			// it is in and abandons the rest (executor.abandon): the
			// bound counts from the stop, not from a deadline that
			// had passed before it.
			due = max(due, stop)
		}
		if late := now - due; late > int64(m.opts.liveness) {
			life := "it never started a runnable"
			if hb := int64(m.b.load(m.b.heartbeatWord(slices.Index(m.plan.Clients, r.Client)))); hb != 0 {
				life = fmt.Sprintf("it last started a runnable %s ago", time.Duration(now-hb).Round(time.Millisecond))
			}
			return fmt.Sprintf("client %s stopped answering: its runnable %s is %s behind its plan (frame %d; %s)", r.Client, r.Name, time.Duration(late).Round(time.Millisecond), next, life)
		}
	}
	return ""
}

// beatEvery is how often a master with the liveness bound liveness
// checks its clients and beats on the board.
func beatEvery(liveness time.Duration) time.Duration {
	return max(min(liveness/4, 50*time.Millisecond), time.Microsecond)
}

// satAdd returns a+b, saturating at the int64 limits instead of
// wrapping around.
func satAdd(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// clientsNamed names clients in a message: "client b" for one, "clients
// a, b" for several, as the clients' own waiting message does.
func clientsNamed(names []string) string {
	if len(names) == 1 {
		return "client " + names[0]
	}
	return "clients " + strings.Join(names, ", ")
}

// satMul returns a×b for a, b >= 0, saturating at math.MaxInt64.
func satMul(a, b int64) int64 {
	if a > 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// collect merges the clients' records into a Run.
func (m *Master) collect(all []PlacedRunnable) (*Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	run := &Run{Format: "pz-stm-run", Version: RunVersion, Plan: m.plan.Hash, Source: m.plan.Source, Stopped: m.stopped}
	if run.Stopped == "" {
		run.Stopped = fmt.Sprintf("frame limit (%s)", plural.Of(int(m.opts.frames), "period"))
	}
	for _, h := range m.plan.Hyperepochs {
		run.Hyperepochs = append(run.Hyperepochs, RunHyperepoch{Name: h.Name, Period: int64(h.Period)})
	}
	var errs []string
	for _, c := range m.plan.Clients {
		cr := ClientRun{Name: c, PID: m.pids[c], PerRun: m.opts.allocs}
		if h := samplerHyperepoch(m.plan, c); h >= 0 {
			cr.PeriodsOf = m.plan.Hyperepochs[h].Name
		}
		run.Clients = append(run.Clients, cr)
		if r := m.results[c]; r != nil {
			run.Clients[len(run.Clients)-1].GC = r.GC
			run.Clients[len(run.Clients)-1].Allocs = r.Allocs
			run.Runnables = append(run.Runnables, r.Runnables...)
			if r.Error != "" {
				errs = append(errs, fmt.Sprintf("client %s: %s", c, r.Error))
			}
			continue
		}
		// Its records were lost: its runnables are listed all the same,
		// marked, so that the record has every runnable of the plan.
		run.Clients[len(run.Clients)-1].Lost = true
		for _, r := range all {
			if r.Client == c {
				run.Runnables = append(run.Runnables, RunnableRun{Name: r.Name, Client: r.Client, Resource: r.Resource, WCET: int64(r.WCET), Lost: true,
					Deps: r.Deps, Submitter: r.Submitter,
					Seq: []int64{}, Planned: []int64{}, Deadline: []int64{}, Start: []int64{}, End: []int64{}, Flags: []int{},
					AllocObjects: []uint64{}, AllocBytes: []uint64{}})
			}
		}
	}
	order := map[string]int{}
	for i, r := range all {
		order[r.Name] = i
	}
	sort.SliceStable(run.Runnables, func(i, j int) bool { return order[run.Runnables[i].Name] < order[run.Runnables[j].Name] })
	for _, rr := range run.Runnables {
		if len(rr.Seq) == 0 {
			continue
		}
		r := all[order[rr.Name]]
		h := &run.Hyperepochs[r.Hyperepoch]
		h.Periods = max(h.Periods, int(rr.Seq[len(rr.Seq)-1]/r.PeriodFrames)+1)
		run.Periods = max(run.Periods, h.Periods)
	}
	if m.abortW != "" {
		// The clients' own errors say more: where a client that stopped
		// answering is stuck, say.
		return run, fmt.Errorf("%w: %s", ErrAborted, strings.Join(append([]string{m.abortW}, errs...), "; "))
	}
	if len(errs) > 0 {
		return run, fmt.Errorf("static: %s", strings.Join(errs, "; "))
	}
	return run, nil
}
