package static

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A Client runs the runnables of one client of a plan. Register every
// runnable the plan gives it (Runnable) and every GPU stream they use
// (Resource), then call EnterScheduler. A Client is used by one
// goroutine, except ExitScheduler, which any goroutine (a runnable
// included) may call.
type Client struct {
	name    string
	dir     string
	plan    string // the plan's hash the client expects; "" any
	fns     map[string]RunnableFunc
	streams map[string]Stream
	log     func(string)
	// masterTimeout is how long the master may go without a beat before
	// the client leaves the run; 0: the master's liveness bound.
	masterTimeout time.Duration
	// planSource and planBody describe that plan (Plan.Source, bodyHash).
	planSource, planBody string
	// setupHook, when not nil, is called at the end of the client's
	// setup, before its resource threads start (tests: a slow setup).
	setupHook func()

	mu   sync.Mutex
	exit func(reason string) // set while in the loop
	// exitEarly is an exit asked for before the loop started; the next
	// run takes it.
	exitEarly string
	signal    os.Signal // the signal that stopped the last run (Signal)
}

// Signal returns the signal (SIGINT or SIGTERM) that stopped the client's
// last EnterScheduler, or nil when none did. EnterScheduler returns nil
// after such a graceful stop of the loop, as after the frame limit, and
// an error naming the signal when it came before the start (while the
// client waited for a master or for the other clients); a client
// program that exits with the signal's status (128+signo) asks here.
func (c *Client) Signal() os.Signal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.signal
}

// A ClientOption configures a Client.
type ClientOption func(*Client)

// WithClientDir sets the directory of the master's socket (see WithDir).
func WithClientDir(dir string) ClientOption { return func(c *Client) { c.dir = dir } }

// WithPlan makes the client refuse to run (and the master refuse it)
// unless the master runs plan: both must be compiled from the same
// schedule.
func WithPlan(plan *Plan) ClientOption {
	return func(c *Client) { c.plan, c.planSource, c.planBody = plan.Hash, plan.Source, plan.bodyHash() }
}

// WithClientLog receives the client's warnings (an unpinned thread, a
// master that does not answer yet).
func WithClientLog(f func(msg string)) ClientOption { return func(c *Client) { c.log = f } }

// WithMasterTimeout sets how long the master may go without beating on
// the run's board before the client takes it for lost (stopped with
// SIGSTOP, deadlocked, starved of CPU), leaves the run and returns
// ErrMasterLost. The master beats every min(liveness/4, 50 ms) while it
// watches the run, so a master merely slow or loaded is not lost. The
// default, 0, is the master's liveness bound (WithLiveness: 1 s, and at
// least two of the plan's longest periods), so that client and master
// give each other the same time; a shorter timeout is raised to four of
// the master's beats.
func WithMasterTimeout(d time.Duration) ClientOption {
	return func(c *Client) { c.masterTimeout = d }
}

// NewClient makes the client named name (one of the plan's clients).
func NewClient(name string, opts ...ClientOption) (*Client, error) {
	if name == "" {
		return nil, errors.New("static: a client needs a name, one of the plan's clients")
	}
	c := &Client{name: name, fns: map[string]RunnableFunc{}, streams: map[string]Stream{}}
	for _, o := range opts {
		o(c)
	}
	if c.masterTimeout < 0 {
		return nil, fmt.Errorf("static: client %s: WithMasterTimeout(%v): want a duration >= 0 (0: the master's liveness bound)", name, c.masterTimeout)
	}
	return c, nil
}

// Name returns the client's name.
func (c *Client) Name() string { return c.name }

// Runnable registers the body of the runnable name. It panics if fn is
// nil or name is registered twice: both are programming errors.
func (c *Client) Runnable(name string, fn RunnableFunc) {
	if fn == nil {
		panic("static: Runnable " + name + " with a nil function")
	}
	if _, dup := c.fns[name]; dup {
		panic("static: Runnable " + name + " registered twice")
	}
	c.fns[name] = fn
}

// Resource gives the stream of the GPU resource name (gpuN.streamM) that
// the client's GPU runnables enqueue on.
func (c *Client) Resource(name string, s Stream) {
	if s == nil {
		panic("static: Resource " + name + " with a nil stream")
	}
	c.streams[name] = s
}

// ExitScheduler asks every client to stop at the next period boundary;
// EnterScheduler then returns nil. Any goroutine may call it, a runnable
// included.
func (c *Client) ExitScheduler() {
	c.mu.Lock()
	f := c.exit
	if f == nil && c.exitEarly == "" {
		c.exitEarly = "ExitScheduler called by client " + c.name
	}
	c.mu.Unlock()
	if f != nil {
		f("ExitScheduler called by client " + c.name)
	}
}

func (c *Client) hello() *message {
	m := &message{Type: msgHello, Client: c.name, Proto: protocolVersion, PID: os.Getpid(), PlanHash: c.plan, PlanSource: c.planSource, PlanBody: c.planBody}
	for n := range c.fns {
		m.Runnables = append(m.Runnables, n)
	}
	for n := range c.streams {
		m.Resources = append(m.Resources, n)
	}
	sort.Strings(m.Runnables)
	sort.Strings(m.Resources)
	return m
}

// EnterScheduler connects to the master (waiting for it to appear, so
// clients and master may start in any order), registers, waits for every
// other client, and runs the client's runnables at their planned times
// until the frame limit, ExitScheduler or SIGINT/SIGTERM, which all end
// at a period boundary (nil; Signal says which signal stopped it);
// during the start delay, before the first period, they end the wait for
// it at once. It returns ErrRefused when the master
// refuses the client, ErrAborted when another client failed, an error
// that is both ErrAborted and ErrMasterLost when the master died or
// stopped beating, mid-run or while the client waited for the start
// (WithMasterTimeout), ctx's error when ctx ends before the start, and
// an error naming the signal when SIGINT or SIGTERM comes before the
// start (while it waits for a master or for the other clients; the
// master then waits for this client again); ctx's end after the start
// is a graceful stop, like a signal. After an abort it returns even if a body
// (or a stream's Mark or WaitMark) has not returned half the master's
// liveness bound later: that goroutine is left running, and the error
// names it.
func (c *Client) EnterScheduler(ctx context.Context) error {
	dir := c.dir
	if dir == "" {
		dir = DefaultDir(os.Getenv)
	}
	c.mu.Lock()
	c.signal = nil
	c.mu.Unlock()
	// SIGINT and SIGTERM end the wait for a master and for the start, as
	// they end the loop: a client that a script started in the background
	// (which inherits SIGINT ignored until a handler is installed) stops
	// when told to, at any time. While dialing, a watcher takes the
	// signal; after, the session does.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	dctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopWatch, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case s := <-sigs:
			c.setSignal(s)
			cancel(fmt.Errorf("client %s got %v", c.name, s))
		case <-stopWatch:
		}
	}()
	conn, err := dialMaster(dctx, dir, func(msg string) {
		if c.log != nil {
			c.log(msg)
		}
	})
	close(stopWatch)
	<-watched
	if err == nil && ctx.Err() == nil && dctx.Err() != nil {
		// The signal came as the dial succeeded.
		conn.Close()
		err = fmt.Errorf("static: %w before it reached the master", context.Cause(dctx))
	}
	if err != nil {
		return err
	}
	sw := &startWatch{option: c.masterTimeout, sock: filepath.Join(dir, sockName)}
	if uc, ok := conn.(*net.UnixConn); ok {
		// The master's pid from the socket (SO_PEERCRED), to name it if it
		// dies before its first message; 0 where the system cannot say.
		if _, pid, err := peerUID(uc); err == nil {
			sw.pid = pid
		}
	}
	return c.session(ctx, newSockLink(conn), sw, sigs)
}

// setSignal records s as the signal that stopped this run (Signal),
// unless one did already.
func (c *Client) setSignal(s os.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.signal == nil {
		c.signal = s
	}
}

// dialWaitLog is how long a client waits for a master before it says so
// (and how often it says so again, five times as long).
const dialWaitLog = time.Second

// dialMaster connects to the socket in dir, retrying until a master
// listens there or ctx ends. After dialWaitLog without one, and every
// five times that after, it tells logf that it is still waiting (a
// mistyped directory would otherwise wait in silence).
func dialMaster(ctx context.Context, dir string, logf func(string)) (net.Conn, error) {
	sock := filepath.Join(dir, sockName)
	delay := 5 * time.Millisecond
	var d net.Dialer
	start := time.Now()
	nextLog := start.Add(dialWaitLog)
	for {
		if now := time.Now(); now.After(nextLog) {
			logf(fmt.Sprintf("waiting for a master on %s for %v (none listens there yet; is -dir / WithClientDir the master's?)", sock, now.Sub(start).Round(time.Second)))
			nextLog = now.Add(5 * dialWaitLog)
		}
		if st, err := os.Stat(dir); err == nil {
			if uid, ok := ownerUID(st); ok && uid != os.Getuid() {
				return nil, fmt.Errorf("static: socket directory %s belongs to user %d, not this client's %d", dir, uid, os.Getuid())
			}
		}
		conn, err := d.DialContext(ctx, "unix", sock)
		if err == nil {
			return conn, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("static: no master answered on %s: %w", sock, context.Cause(ctx))
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// session runs the client over an established link; sw watches the
// master until the start. sigs (nil in process: RunLocal) delivers
// SIGINT and SIGTERM, which end the wait for the start with an error
// and the loop gracefully.
func (c *Client) session(ctx context.Context, l link, sw *startWatch, sigs <-chan os.Signal) error {
	signals := sigs != nil
	defer l.close()
	if err := l.send(c.hello()); err != nil {
		return fmt.Errorf("static: client %s: sending hello: %w", c.name, err)
	}
	// Wait for the start without blocking on ctx forever: a reader
	// goroutine forwards messages.
	msgs := make(chan *message, 4)
	rerr := make(chan error, 1)
	go func() {
		defer close(msgs)
		for {
			m, err := l.recv()
			if err != nil {
				rerr <- err
				return
			}
			msgs <- m
		}
	}()
	start, err := c.awaitStart(ctx, msgs, rerr, sw, sigs)
	if err != nil {
		return err
	}
	var b *board
	if lb, ok := l.(*chanLink); ok && start.Board == localBoard {
		b = lb.board
	} else {
		var err error
		all := start.Plan.Runnables()
		if b, err = openBoardFile(start.Board, len(all), len(start.Plan.Clients)); err != nil {
			return fmt.Errorf("static: client %s: %w", c.name, err)
		}
		defer b.close()
	}
	clk := newClock()
	exec := newExecutor(start.Plan, c.name, c.fns, c.streams, start.Frames, start.Allocs, c.log)
	if start.Liveness > 0 {
		exec.abandonAfter = time.Duration(start.Liveness / 2)
	}
	if signals { // a client process of its own (EnterScheduler)
		defer raiseProcs(len(exec.threads))()
		// Collect the setup's garbage now, not in the loop's first periods.
		runtime.GC()
	}
	if lb, ok := l.(*chanLink); ok && lb.afterSetup != nil {
		lb.afterSetup() // RunLocal's clients share a process: see there
	}
	if c.setupHook != nil {
		c.setupHook()
	}
	// Once the resource threads are started and pinned, the client is
	// ready; the master starts the first period (t0) once every client
	// is, so that no setup is counted inside the plan.
	exec.ready = func() {
		if err := l.send(&message{Type: msgReady}); err != nil && c.log != nil {
			c.log(fmt.Sprintf("client %s: telling the master it is ready: %v", c.name, err))
		}
	}

	runCtx, abort := context.WithCancel(context.Background())
	defer abort()
	var abortReason string
	var amu sync.Mutex
	stopReq := func(reason string) {
		b.requestStop(clk.now())
		l.send(&message{Type: msgStop, Reason: reason})
	}
	c.mu.Lock()
	c.exit = stopReq
	early := c.exitEarly
	c.exitEarly = "" // it stops this run, not every later one
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.exit = nil
		c.mu.Unlock()
	}()
	if early != "" {
		stopReq(early)
	}
	// Watch the master, the caller's ctx and the signals while the loop
	// runs.
	watchDone := make(chan struct{})
	bye := make(chan struct{})
	abortMsg := make(chan struct{}) // closed once the master's abort (or its end) is in
	var abortOnce sync.Once
	mw := c.newMasterWatch(start, b, clk)
	beat := time.NewTicker(mw.every)
	defer beat.Stop()
	var lost bool // the master died or stopped beating; under amu
	// leave ends the run on the client's side, for reason, once the
	// master is lost. It leaves the board's abort word alone (every
	// client watches the master itself, and a master only stopped,
	// resumed later, must not read a client's abort as a stranger's:
	// checkBoardAbort), and closes the link, so
	// that a result or a stop sent to a master that no longer reads
	// fails instead of blocking once the socket's buffer is full.
	leave := func(reason string) {
		amu.Lock()
		if abortReason == "" {
			abortReason, lost = reason, true
		}
		amu.Unlock()
		abort()
		abortOnce.Do(func() { close(abortMsg) })
		l.close()
	}
	var resultSent atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctxDone := ctx.Done()
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					amu.Lock()
					told := abortReason != ""
					amu.Unlock()
					if resultSent.Load() && (told || !b.aborted()) {
						// The master ended after taking the result, or
						// after saying why the run aborted.
						return
					}
					// The board says abort and the master said nothing
					// before the link closed: another client found the
					// master gone first and set the abort word (below),
					// and this client's result went to a dead master.
					// The master is gone: leave. The abort word tells
					// the other clients at once (their links close too).
					b.abort()
					leave(mw.goneReason())
					return
				}
				switch m.Type {
				case msgAbort:
					amu.Lock()
					abortReason = m.Reason
					amu.Unlock()
					b.abort()
					abort()
					abortOnce.Do(func() { close(abortMsg) })
				case msgBye:
					close(bye)
					return
				}
			case s := <-sigs:
				c.setSignal(s)
				stopReq(fmt.Sprintf("client %s got %v", c.name, s))
			case <-ctxDone:
				ctxDone = nil
				stopReq(fmt.Sprintf("client %s was stopped (%v)", c.name, context.Cause(ctx)))
			case <-beat.C:
				if why := mw.check(); why != "" {
					leave(why)
					return
				}
			case <-watchDone:
				return
			}
		}
	}()
	runs, err := exec.run(runCtx, b, clk)
	res := &clientResult{Runnables: runs, GC: exec.gc, Allocs: exec.allocs}
	if err != nil {
		res.Error = err.Error()
	}
	// The record goes to the master even after an abort: it shows what
	// led up to the fault.
	resultSent.Store(true)
	l.send(&message{Type: msgResult, Result: res})
	if b.aborted() {
		// The board says abort; the master's message says why.
		select {
		case <-abortMsg:
		case <-time.After(time.Second):
		}
	} else {
		// Wait for the master's bye (or its end), so that the result is
		// not cut off by an exit right after.
		select {
		case <-bye:
		case <-runCtx.Done(): // aborted meanwhile
		case <-time.After(5 * time.Second):
		}
	}
	close(watchDone)
	l.close()
	wg.Wait()
	amu.Lock()
	defer amu.Unlock()
	if abortReason != "" || b.aborted() {
		if abortReason == "" {
			abortReason = "aborted by the master"
		}
		if err != nil {
			// Where this client is stuck, say.
			abortReason += "; " + err.Error()
		}
		if lost {
			return &lostError{msg: fmt.Sprintf("%v: client %s: %s", ErrAborted, c.name, abortReason)}
		}
		if strings.HasPrefix(abortReason, "client "+c.name+" ") {
			// The reason names this client already ("client b stopped
			// answering: ..."): not "client b: client b ...".
			return fmt.Errorf("%w: %s", ErrAborted, abortReason)
		}
		return fmt.Errorf("%w: client %s: %s", ErrAborted, c.name, abortReason)
	}
	return nil
}

// awaitStart waits for the master's start message, watching the
// master's beats meanwhile (startWatch). Once joined (the first beat),
// after dialWaitLog without a start and every five times that after, it
// tells the client's log which clients the master still waits for (the
// beats name them), so that a joined client does not wait in silence.
func (c *Client) awaitStart(ctx context.Context, msgs <-chan *message, rerr <-chan error, sw *startWatch, sigs <-chan os.Signal) (*message, error) {
	// Until the first beat there is nothing to check; then two checks
	// per beat.
	tick := time.NewTicker(waitBeatEvery(time.Second))
	defer tick.Stop()
	var joined, nextLog time.Time
	var waiting []string // the clients the master's last beat waited for
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				err := <-rerr
				if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
					return nil, &lostError{msg: fmt.Sprintf("static: client %s: %s", c.name, sw.gone(err))}
				}
				return nil, fmt.Errorf("static: client %s: reading from %s before the start: %w", c.name, sw.who(), err)
			}
			now := time.Now()
			if first := sw.every == 0; sw.beat(m, now) && first {
				tick.Reset(sw.every / 2)
			}
			switch m.Type {
			case msgBeat:
				if joined.IsZero() {
					joined, nextLog = now, now.Add(dialWaitLog)
				}
				waiting = m.Waiting
			case msgRefused:
				return nil, fmt.Errorf("%w: client %s: %s", ErrRefused, c.name, m.Reason)
			case msgAbort: // the master ends before the start, saying why
				return nil, fmt.Errorf("%w: client %s: %s", ErrAborted, c.name, m.Reason)
			case msgStart:
				return m, nil
			default:
				return nil, fmt.Errorf("static: client %s: the master sent %s before start", c.name, m.Type)
			}
		case now := <-tick.C:
			if why := sw.check(now); why != "" {
				return nil, &lostError{msg: fmt.Sprintf("static: client %s: %s", c.name, why)}
			}
			if !joined.IsZero() && now.After(nextLog) && len(waiting) > 0 && c.log != nil {
				who, them := "client", "it"
				if len(waiting) > 1 {
					who, them = "clients", "them"
				}
				c.log(fmt.Sprintf("joined %s %v ago; waiting for the start: the master still waits for %s %s (start %s)",
					sw.who(), now.Sub(joined).Round(time.Second), who, strings.Join(waiting, ", "), them))
				nextLog = now.Add(5 * dialWaitLog)
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("static: client %s: waiting for the start: %w", c.name, context.Cause(ctx))
		case s := <-sigs:
			c.setSignal(s)
			return nil, fmt.Errorf("static: client %s got %v while waiting for the start; the master waits for it again", c.name, s)
		}
	}
}

// raiseProcs makes GOMAXPROCS at least threads+2 while a loop runs: each
// resource's locked thread holds a P while it spins, and the process's
// other goroutines (the link to the master, the streams' threads, the
// collector) need Ps of their own, or the runtime preempts a resource's
// thread to run them. It returns the function that restores the setting.
func raiseProcs(threads int) func() {
	prev := runtime.GOMAXPROCS(0)
	if prev >= threads+2 {
		return func() {}
	}
	runtime.GOMAXPROCS(threads + 2)
	return func() { runtime.GOMAXPROCS(prev) }
}
