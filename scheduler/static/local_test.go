package static

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func loadPlan(t *testing.T, path string) *Plan {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	s, err := Parse(src, path)
	require.NoError(t, err)
	p, err := Compile(s)
	require.NoError(t, err)
	return p
}

func TestRunLocalPipeline(t *testing.T) {
	plan := loadPlan(t, "testdata/pipeline.yaml")
	// Run every frame whatever the timing (the race detector slows runs
	// past their WCETs), so that the counts are exact.
	for i := range plan.Hyperepochs[0].Epochs[0].Runnables {
		plan.Hyperepochs[0].Epochs[0].Runnables[i].Overrun = NoSkip
	}
	plan.Hash = plan.hash()
	stream := NewHostStream()
	defer stream.Close()
	var grabbed, detected, planned atomic.Int64
	cam, _ := NewClient("camera")
	cam.Runnable("grab", func(context.Context) error { grabbed.Add(1); return nil })
	cam.Runnable("detect_submit", func(context.Context) error { return nil })
	cam.Runnable("detect", func(context.Context) error {
		stream.Enqueue(func() { time.Sleep(time.Millisecond); detected.Add(1) })
		return nil
	})
	cam.Resource("gpu0.stream0", stream)
	pl, _ := NewClient("planner")
	pl.Runnable("plan", func(context.Context) error {
		// detect of the same frame has ended on the stream (grab may run
		// ahead: it depends on nothing).
		n := planned.Add(1)
		if d := detected.Load(); d < n {
			t.Errorf("plan of frame %d ran before detect of that frame ended (%d detected)", n-1, d)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := runLocal(ctx, plan, []*Client{cam, pl}, WithFrames(20))
	require.NoError(t, err)
	assert.EqualValues(t, 20, planned.Load())
	assert.Equal(t, 20, run.Periods)
	require.Len(t, run.Runnables, 4)
	for _, r := range run.Runnables {
		assert.Len(t, r.Seq, 20, r.Name)
		if r.Resource == "gpu0.stream0" {
			continue // a submittee starts when its submitter enqueues it
		}
		for i := range r.Seq {
			assert.GreaterOrEqual(t, r.Start[i], r.Planned[i], "%s starts before its plan", r.Name)
		}
	}
	t.Logf("stopped: %s", run.Stopped)
}

// runLocal is RunLocal with a liveness bound of 10 s, ahead of the test's
// options: the tests run beside others under the race detector, where a
// thread can wait a second for a core.
func runLocal(ctx context.Context, plan *Plan, clients []*Client, opts ...Option) (*Run, error) {
	return RunLocal(ctx, plan, clients, append([]Option{WithLiveness(10 * time.Second)}, opts...)...)
}

// RunLocal has every client in hand: one missing (or given twice, or nil)
// is refused at once, naming it, rather than waited for forever.
func TestRunLocalRefusesMissingClients(t *testing.T) {
	plan := compileString(t, threeClients)
	mk := func(name string, runs ...string) *Client {
		c, _ := NewClient(name)
		for _, r := range runs {
			c.Runnable(r, func(context.Context) error { return nil })
		}
		return c
	}
	a, b := mk("a", "a1", "a2"), mk("b", "b1")
	for i, tc := range []struct {
		clients []*Client
		want    []string
	}{
		{[]*Client{a}, []string{"no Client for b, c of the plan"}},
		{[]*Client{a, b, nil}, []string{"clients[2] is nil", "no Client for c"}},
		{[]*Client{a, b, a}, []string{"client a is given twice", "no Client for c"}},
		{[]*Client{a, b, mk("zzz", "z1")}, []string{"client zzz is not one of the plan's", "no Client for c"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// Refused, not the context's end (it waited for the missing
		// client until then).
		run, err := runLocal(ctx, plan, tc.clients, WithFrames(1))
		cancel()
		assert.Nil(t, run, "case %d", i)
		require.ErrorIs(t, err, ErrRefused, "case %d", i)
		for _, w := range tc.want {
			assert.ErrorContains(t, err, w, "case %d", i)
		}
	}
}

// A SIGINT or SIGTERM to RunLocal before the start ends the wait for it
// (requestStop alone has no board to stop yet, and the signal was lost);
// after the start, it stops the run at a period boundary, naming the
// signal in the record.
func TestRunLocalSignalBeforeStart(t *testing.T) {
	plan := compileString(t, threeClients)
	m, err := NewMaster(plan)
	require.NoError(t, err)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan error, 1)
	go func() {
		_, err := m.supervise(ctx) // no client joins: it waits for them
		done <- err
	}()
	m.stopOnSignal(syscall.SIGTERM, cancel)
	select {
	case err := <-done:
		require.Error(t, err)
		assert.ErrorContains(t, err, "the run did not start: the process running RunLocal got terminated")
	case <-time.After(10 * time.Second):
		t.Fatal("the master still waits for its clients after SIGTERM")
	}
}

// TestStopDuringStartDelay: a stop that comes while the clients wait for
// the first period (an hour after the last one joined) ends the run at
// once, as a stop in the loop does at the next period boundary: nil
// errors, the stop's reason in the record, and no frames. The master's
// stop (its context) and a client's (ExitScheduler), in one process
// (RunLocal) and over the socket and the board file (Run and
// EnterScheduler). (Before, the clients' threads slept until the first
// period and only then saw the stop: the run lasted the whole delay.)
func TestStopDuringStartDelay(t *testing.T) {
	plan := compileString(t, threeClients)
	for _, tc := range []struct {
		name   string
		socket bool // Master.Run and EnterScheduler; else RunLocal
		// stop stops the run: cancel ends the master's context.
		stop   func(cancel context.CancelFunc, clients []*Client)
		reason string
	}{
		{"RunLocal/context", false, func(cancel context.CancelFunc, _ []*Client) { cancel() }, "the master was stopped (context canceled)"},
		{"RunLocal/ExitScheduler", false, func(_ context.CancelFunc, cs []*Client) { cs[1].ExitScheduler() }, "ExitScheduler called by client b"},
		{"Run/context", true, func(cancel context.CancelFunc, _ []*Client) { cancel() }, "the master was stopped (context canceled)"},
		{"EnterScheduler/ExitScheduler", true, func(_ context.CancelFunc, cs []*Client) { cs[1].ExitScheduler() }, "ExitScheduler called by client b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A few seconds, where the delay is an hour: the run must
			// end well before it.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			dir := privateTestDir(t)
			var ran atomic.Int64
			var clients []*Client
			for _, regs := range [][]string{{"a1", "a2"}, {"b1"}, {"c1"}} {
				c, err := NewClient(regs[0][:1], WithClientDir(dir))
				require.NoError(t, err)
				for _, r := range regs {
					c.Runnable(r, func(context.Context) error { ran.Add(1); return nil })
				}
				clients = append(clients, c)
			}
			started := make(chan struct{})
			var once sync.Once
			opts := []Option{WithStartDelay(time.Hour), WithLiveness(10 * time.Second), WithSignals(false), WithDir(dir),
				WithLog(func(msg string) {
					t.Log(msg)
					if strings.Contains(msg, "every client is in") {
						once.Do(func() { close(started) })
					}
				})}
			mctx, mcancel := context.WithCancel(ctx)
			defer mcancel()
			res := make(chan masterResult, 1)
			entered := make(chan error, len(clients))
			if tc.socket {
				m, err := NewMaster(plan, opts...)
				require.NoError(t, err)
				go func() {
					r, err := m.Run(mctx)
					res <- masterResult{r, err}
				}()
				for _, c := range clients {
					go func() { entered <- c.EnterScheduler(ctx) }()
				}
			} else {
				go func() {
					r, err := RunLocal(mctx, plan, clients, opts...)
					res <- masterResult{r, err}
				}()
			}
			select {
			case <-started:
			case <-ctx.Done():
				t.Fatal("the run did not start")
			}
			tc.stop(mcancel, clients)
			var r masterResult
			select {
			case r = <-res:
			case <-ctx.Done():
				t.Fatal("the run still waits for its first period, an hour away, after the stop")
			}
			require.NoError(t, r.err)
			assert.Contains(t, r.run.Stopped, tc.reason)
			assert.Zero(t, r.run.Periods, "periods run")
			require.Len(t, r.run.Runnables, 4)
			for _, rr := range r.run.Runnables {
				assert.Empty(t, rr.Seq, "%s ran frames", rr.Name)
			}
			assert.Zero(t, ran.Load(), "runnables ran")
			if tc.socket {
				for range clients {
					select {
					case err := <-entered:
						assert.NoError(t, err, "EnterScheduler")
					case <-ctx.Done():
						t.Fatal("a client's EnterScheduler did not return")
					}
				}
			}
		})
	}
}

// TestExitSchedulerBeforeRunStopsThatRunOnly: an ExitScheduler called
// before a run stops that run at once; the next run with the same
// clients runs its frames (the request stayed and stopped every later
// run).
func TestExitSchedulerBeforeRunStopsThatRunOnly(t *testing.T) {
	plan := compileString(t, threeClients)
	var clients []*Client
	for _, regs := range [][]string{{"a1", "a2"}, {"b1"}, {"c1"}} {
		c, err := NewClient(regs[0][:1])
		require.NoError(t, err)
		for _, r := range regs {
			c.Runnable(r, func(context.Context) error { return nil })
		}
		clients = append(clients, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clients[1].ExitScheduler()
	run, err := runLocal(ctx, plan, clients, WithFrames(50), WithSignals(false))
	require.NoError(t, err)
	assert.Equal(t, "ExitScheduler called by client b", run.Stopped)
	assert.Less(t, run.Periods, 50, "the first run stopped early")
	run, err = runLocal(ctx, plan, clients, WithFrames(2), WithSignals(false))
	require.NoError(t, err)
	assert.Equal(t, 2, run.Periods, "the second run ran its frames: %s", run.Stopped)
	assert.NotContains(t, run.Stopped, "ExitScheduler")
}

// TestClientSaysItWaitsForMaster: a client whose directory has no master
// says, through WithClientLog, that it waits and where, instead of
// waiting in silence (a mistyped directory hung a client without a word).
func TestClientSaysItWaitsForMaster(t *testing.T) {
	dir := privateTestDir(t)
	logged := make(chan string, 10)
	c, err := NewClient("a", WithClientDir(dir), WithClientLog(func(m string) {
		select {
		case logged <- m:
		default:
		}
	}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.EnterScheduler(ctx) }()
	select {
	case m := <-logged:
		assert.Contains(t, m, "waiting for a master on "+filepath.Join(dir, sockName))
		assert.Contains(t, m, "none listens there yet")
	case <-time.After(time.Minute):
		t.Fatal("the client said nothing while it waited")
	}
	cancel()
	err = <-done
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "no master answered on")
}

// TestClientSignal: a SIGTERM stops a client process's run gracefully
// (EnterScheduler returns nil, as after the frame limit) and Signal says
// which signal did, so that the program can exit with its status (it
// could not tell).
func TestClientSignal(t *testing.T) {
	plan := compileString(t, `
hyperepochs:
  - {name: main, period: 5ms, resources: [cpu0], epochs: [{name: frame}]}
clients: [a]
runnables:
  - {name: a1, client: a, resource: cpu0, wcet: 1ms}
`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := privateTestDir(t)
	m, err := NewMaster(plan, WithDir(dir), WithSignals(false), WithLiveness(10*time.Second))
	require.NoError(t, err)
	res := make(chan masterResult, 1)
	go func() {
		r, err := m.Run(ctx)
		res <- masterResult{r, err}
	}()
	c, err := NewClient("a", WithClientDir(dir))
	require.NoError(t, err)
	ran := make(chan struct{})
	var once sync.Once
	c.Runnable("a1", func(context.Context) error { once.Do(func() { close(ran) }); return nil })
	entered := make(chan error, 1)
	go func() { entered <- c.EnterScheduler(ctx) }()
	select {
	case <-ran: // the loop runs: the client watches the signals
	case <-ctx.Done():
		t.Fatal("the run did not start")
	}
	require.Nil(t, c.Signal(), "before the signal")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	require.NoError(t, <-entered, "a graceful stop")
	assert.Equal(t, syscall.SIGTERM, c.Signal())
	r := waitFor(t, res, "the master")
	require.NoError(t, r.err)
	assert.Contains(t, r.run.Stopped, "client a got terminated")
}

// TestDefaultDir: the environment's directories first, else one in
// /dev/shm (memory) where it exists.
func TestDefaultDir(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	assert.Equal(t, "/x", DefaultDir(env(map[string]string{"PZ_STM_DIR": "/x", "XDG_RUNTIME_DIR": "/run/user/1"})))
	assert.Equal(t, "/run/user/1/pz-stm", DefaultDir(env(map[string]string{"XDG_RUNTIME_DIR": "/run/user/1"})))
	want := filepath.Join(os.TempDir(), fmt.Sprintf("pz-stm-%d", os.Getuid()))
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		want = fmt.Sprintf("/dev/shm/pz-stm-%d", os.Getuid())
	}
	assert.Equal(t, want, DefaultDir(env(nil)))
}

// A body that never returns (trial finding: a client process whose
// runnable blocked forever hung after the master aborted the run, and
// ignored SIGINT and SIGTERM, which the client catches in the loop):
// once the run is aborted, the client waits half the liveness bound for
// its threads, then leaves the stuck one behind and returns ErrAborted,
// naming the runnable and its frame. Two threads of b are stuck: each is
// left behind (the trial's client had two).
func TestStuckBodyDoesNotHoldTheClient(t *testing.T) {
	plan := compileString(t, `
hyperepochs:
  - {name: main, period: 10ms, resources: [cpu0, cpu1, cpu2], epochs: [{name: frame}]}
clients: [a, b]
runnables:
  - {name: tick, client: a, resource: cpu0, wcet: 1ms}
  - {name: stuck, client: b, resource: cpu1, wcet: 1ms}
  - {name: after, client: b, resource: cpu1, wcet: 1ms, deps: [stuck]}
  - {name: stuck2, client: b, resource: cpu2, wcet: 1ms}
`)
	release := make(chan struct{})
	defer close(release) // the stuck body returns at the end, into an abandoned thread
	a, _ := NewClient("a")
	a.Runnable("tick", func(context.Context) error { return nil })
	b, _ := NewClient("b")
	b.Runnable("stuck", func(ctx context.Context) error {
		// Frame 3, or the first after it if a loaded machine made the
		// executor skip it (frameskip).
		if f, _ := Frame(ctx); f >= 3 {
			<-release // ignores ctx: pz cannot stop it
		}
		return nil
	})
	b.Runnable("after", func(context.Context) error { return nil })
	b.Runnable("stuck2", func(ctx context.Context) error {
		if f, _ := Frame(ctx); f >= 3 {
			<-release
		}
		return nil
	})
	type result struct {
		run *Run
		err error
	}
	done := make(chan result, 1)
	go func() {
		run, err := RunLocal(context.Background(), plan, []*Client{a, b}, WithLiveness(time.Second), WithSignals(false))
		done <- result{run, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("RunLocal did not return: the stuck body holds client b")
	}
	require.ErrorIs(t, res.err, ErrAborted)
	assert.ErrorContains(t, res.err, "client b stopped answering")
	assert.Regexp(t, `runnable stuck has not returned from its body \(frame ([3-9]|\d\d+),`, res.err.Error())
	assert.Regexp(t, `runnable stuck2 has not returned from its body \(frame ([3-9]|\d\d+),`, res.err.Error())
	require.NotNil(t, res.run)
	for _, r := range res.run.Runnables {
		assert.False(t, r.Lost, "%s: the records of the stuck client reach the master", r.Name)
	}
	assertStuckRow(t, res.run, "stuck", "runnable stuck has not returned from its body")
	assertStuckRow(t, res.run, "stuck2", "runnable stuck2 has not returned from its body")
}

// assertStuckRow checks that the run in which the client left runnable
// name's thread behind is the runnable's last row, ended when the client
// left it, flagged as overrun and as an error with the client's message,
// and that the analysis counts it (found in the fault-injection trial: a
// body that never returned had no row at all, so pzrun stm analyze showed
// the runnable that stopped the run with no overrun and no error).
func assertStuckRow(t *testing.T, run *Run, name, msg string) {
	t.Helper()
	require.NotNil(t, run)
	var rr *RunnableRun
	for i := range run.Runnables {
		if run.Runnables[i].Name == name {
			rr = &run.Runnables[i]
		}
	}
	require.NotNil(t, rr, name)
	n := len(rr.Seq)
	require.NotZero(t, n, "%s has no rows", name)
	last := n - 1
	assert.GreaterOrEqual(t, rr.Seq[last], int64(3), "%s: the stuck frame", name)
	want := FlagError | FlagOverrunWCET | FlagOverrunDeadline
	assert.Equal(t, want, rr.Flags[last]&want, "%s: the stuck run's flags", name)
	// The client leaves the thread half the liveness bound (1 s) after
	// the abort, which comes the bound after the run's deadline.
	assert.Greater(t, rr.End[last]-rr.Start[last], int64(time.Second), "%s: the stuck run's length", name)
	require.NotEmpty(t, rr.Errors, name)
	assert.Contains(t, rr.Errors[len(rr.Errors)-1], fmt.Sprintf("frame %d: %s", rr.Seq[last], msg))
	a := Analyze(run)
	for _, s := range a.Runnables {
		if s.Name == name {
			assert.GreaterOrEqual(t, s.OverrunsWCET, 1, name)
			assert.GreaterOrEqual(t, s.Errors, 1, name)
		}
	}
}

// blockingStream is a Stream whose WaitMark for ticket 4 waits for
// release, ignoring ctx.
type blockingStream struct {
	n       atomic.Uint64
	release chan struct{}
}

func (s *blockingStream) Mark(context.Context) (uint64, error) { return s.n.Add(1), nil }

func (s *blockingStream) WaitMark(_ context.Context, t uint64) error {
	if t == 4 {
		<-s.release
	}
	return nil
}

// The same for a stream whose WaitMark never returns: the client leaves
// the stream's thread behind and names the stream.
func TestStuckStreamDoesNotHoldTheClient(t *testing.T) {
	plan := compileString(t, `
hyperepochs:
  - {name: main, period: 10ms, resources: [cpu0, gpu0.stream0], epochs: [{name: frame}]}
clients: [c]
runnables:
  - {name: sub, client: c, resource: cpu0, wcet: 1ms}
  - {name: k, client: c, resource: gpu0.stream0, wcet: 1ms, submitter: sub}
  - {name: use, client: c, resource: cpu0, wcet: 1ms, deps: [k]}
`)
	s := &blockingStream{release: make(chan struct{})}
	defer close(s.release)
	c, _ := NewClient("c")
	c.Runnable("sub", func(context.Context) error { return nil })
	c.Runnable("k", func(context.Context) error { return nil })
	c.Runnable("use", func(context.Context) error { return nil })
	c.Resource("gpu0.stream0", s)
	type result struct {
		run *Run
		err error
	}
	done := make(chan result, 1)
	go func() {
		run, err := RunLocal(context.Background(), plan, []*Client{c}, WithLiveness(time.Second), WithSignals(false))
		done <- result{run, err}
	}()
	select {
	case res := <-done:
		err := res.err
		require.ErrorIs(t, err, ErrAborted)
		// Frame 3 holds ticket 4 unless a frame before it was skipped
		// (frameskip after an overrun, on a loaded machine): then a
		// later one does.
		assert.Regexp(t, `stream gpu0\.stream0 has not returned from WaitMark \(runnable k, frame ([3-9]|\d\d+),`, err.Error())
		assertStuckRow(t, res.run, "k", "stream gpu0.stream0 has not returned from WaitMark")
	case <-time.After(60 * time.Second):
		t.Fatal("RunLocal did not return: the stuck stream holds client c")
	}
}

// A client that registers a runnable of another client, or a misspelt
// one, is told which (found in the schedule-writing trial: the refusal
// said only "which the plan does not give client a"); a client not in
// the plan is told the plan's clients.
func TestRunLocalRefusalSaysTheFix(t *testing.T) {
	plan := compileString(t, `
hyperepochs: [{name: h, period: 10ms, resources: [cpu0, cpu1], epochs: [{name: f}]}]
clients: [camera, planner]
runnables:
  - {name: grab,   client: camera,  resource: cpu0, wcet: 1ms}
  - {name: detect, client: camera,  resource: cpu0, wcet: 1ms, deps: [grab]}
  - {name: plan,   client: planner, resource: cpu1, wcet: 1ms, deps: [detect]}
`)
	mk := func(name string, runs ...string) *Client {
		c, _ := NewClient(name)
		for _, r := range runs {
			c.Runnable(r, func(context.Context) error { return nil })
		}
		return c
	}
	for i, tc := range []struct {
		clients []*Client
		want    string
	}{
		{[]*Client{mk("camera", "grab", "detct"), mk("planner", "plan")},
			`it registered detct (did you mean "detect"?), which the plan does not give client camera; it did not register detect`},
		{[]*Client{mk("camera", "grab", "detect", "plan"), mk("planner", "plan")},
			`it registered plan (the plan gives it to client planner), which the plan does not give client camera`},
		{[]*Client{mk("camera", "grab", "detect"), mk("planner", "plan"), mk("planer")},
			`client planer is not one of the plan's (its clients are camera, planner)`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		run, err := runLocal(ctx, plan, tc.clients, WithFrames(1))
		cancel()
		assert.Nil(t, run, "case %d", i)
		require.ErrorIs(t, err, ErrRefused, "case %d", i)
		assert.ErrorContains(t, err, tc.want, "case %d", i)
	}
}
