package static

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The test binary doubles as a client process: with PZ_STM_TEST_CLIENT
// set it registers that client's runnables of the plan in
// PZ_STM_TEST_PLAN (busy bodies; with PZ_STM_TEST_SETUP_BLOCK=1 its
// setup ends only when its stdin does), prints "frame N" when its first
// runnable (or PZ_STM_TEST_SAY_RUNNABLE) reaches frame N
// (PZ_STM_TEST_SAY), and enters the scheduler.
func TestMain(m *testing.M) {
	if name := os.Getenv("PZ_STM_TEST_CLIENT"); name != "" {
		os.Exit(clientProcess(name))
	}
	if path := os.Getenv("PZ_STM_TEST_ECHO"); path != "" {
		os.Exit(echoProcess(path))
	}
	if dir := os.Getenv("PZ_STM_TEST_DIAL"); dir != "" {
		os.Exit(dialProcess(dir))
	}
	if path := os.Getenv("PZ_STM_TEST_MASTER"); path != "" {
		os.Exit(masterProcess(path))
	}
	os.Exit(m.Run())
}

func clientProcess(name string) int {
	f, err := os.Open(os.Getenv("PZ_STM_TEST_PLAN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	plan, err := ReadPlan(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	var say int64
	fmt.Sscan(os.Getenv("PZ_STM_TEST_SAY"), &say)
	opts := []ClientOption{WithClientDir(os.Getenv("PZ_STM_DIR"))}
	if os.Getenv("PZ_STM_TEST_LOG") == "1" {
		opts = append(opts, WithClientLog(func(msg string) { fmt.Fprintln(os.Stderr, name+":", msg) }))
	}
	if d, err := time.ParseDuration(os.Getenv("PZ_STM_TEST_MASTER_TIMEOUT")); err == nil {
		opts = append(opts, WithMasterTimeout(d))
	}
	c, _ := NewClient(name, opts...)
	if os.Getenv("PZ_STM_TEST_SETUP_BLOCK") == "1" {
		// A setup that does not finish until the test lets it: until
		// stdin ends.
		c.setupHook = func() {
			fmt.Fprintln(os.Stderr, name+": setup blocked")
			io.Copy(io.Discard, os.Stdin)
		}
	}
	sayer := os.Getenv("PZ_STM_TEST_SAY_RUNNABLE")
	for _, r := range plan.Runnables() {
		if r.Client != name {
			continue
		}
		work := r.WCET / 4
		if sayer == "" {
			sayer = r.Name // the client's first
		}
		if r.Name == sayer {
			n := int64(0)
			c.Runnable(r.Name, func(context.Context) error {
				n++
				if n == say {
					fmt.Println("frame", n)
				}
				spin(work)
				return nil
			})
			continue
		}
		c.Runnable(r.Name, func(context.Context) error { spin(work); return nil })
	}
	if err := c.EnterScheduler(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "client", name+":", err)
		if errors.Is(err, ErrMasterLost) && errors.Is(err, ErrAborted) {
			return exitMasterLost
		}
		return 1
	}
	return 0
}

// dialProcess says hello to the master in dir and prints its answer.
func dialProcess(dir string) int {
	conn, err := net.Dial("unix", filepath.Join(dir, sockName))
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	l := newSockLink(conn)
	l.send(&message{Type: msgHello, Client: "a", Runnables: []string{"a1", "a2"}})
	m, err := l.recv()
	if err != nil {
		fmt.Println("recv:", err)
		return 1
	}
	fmt.Println(m.Type+":", m.Reason)
	return 0
}

func spin(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
	}
}

// threeClients is a plan of three clients with dependencies across them
// at 5 ms.
const threeClients = `
hyperepochs:
  - name: main
    period: 5ms
    resources: [cpu0, cpu1]
    epochs: [{name: frame}]
clients: [a, b, c]
runnables:
  - {name: a1, client: a, resource: cpu0, wcet: 400us}
  - {name: b1, client: b, resource: cpu1, wcet: 400us, deps: [a1]}
  - {name: c1, client: c, resource: cpu0, wcet: 400us, deps: [a1]}
  - {name: a2, client: a, resource: cpu1, wcet: 400us, deps: [b1, c1]}
`

func compileString(t testing.TB, src string) *Plan {
	t.Helper()
	s, err := Parse([]byte(src), "test.yaml")
	require.NoError(t, err)
	p, err := Compile(s)
	require.NoError(t, err)
	return p
}

// procClient is a client process started by a test.
type procClient struct {
	name   string
	cmd    *exec.Cmd
	stderr *strings.Builder
	said   chan struct{} // closed when it printed its frame line
	done   chan error
	lines  chan string // a master's log lines (startMasterProcess); nil for a client
}

func startClient(t *testing.T, dir, planPath, name string, say int64) *procClient {
	t.Helper()
	return startClientSaying(t, dir, planPath, name, "", say)
}

// startClientSaying is startClient whose runnable named runnable (the
// client's first if "") says when it reaches frame say.
func startClientSaying(t *testing.T, dir, planPath, name, runnable string, say int64) *procClient {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run", "^$")
	cmd.Env = append(os.Environ(), "PZ_STM_TEST_CLIENT="+name, "PZ_STM_TEST_PLAN="+planPath, "PZ_STM_DIR="+dir, fmt.Sprintf("PZ_STM_TEST_SAY=%d", say), "PZ_STM_TEST_SAY_RUNNABLE="+runnable)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &procClient{name: name, cmd: cmd, stderr: &strings.Builder{}, said: make(chan struct{}), done: make(chan error, 1)}
	cmd.Stderr = &lockedWriter{w: p.stderr}
	require.NoError(t, cmd.Start())
	go func() {
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "frame ") {
				once.Do(func() { close(p.said) })
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
	})
	return p
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *procClient) String() string {
	if w, ok := p.cmd.Stderr.(*lockedWriter); ok {
		w.mu.Lock()
		defer w.mu.Unlock()
	}
	return p.stderr.String()
}

func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(60 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// runMaster starts a master in a goroutine; the channel gets its result.
type masterResult struct {
	run *Run
	err error
}

func startMaster(t *testing.T, plan *Plan, opts ...Option) <-chan masterResult {
	t.Helper()
	// A generous liveness bound unless the test sets one: the tests run
	// beside others under the race detector.
	m, err := NewMaster(plan, append([]Option{WithLiveness(10 * time.Second), WithLog(func(s string) { t.Log(s) })}, opts...)...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch := make(chan masterResult, 1)
	go func() {
		r, err := m.Run(ctx)
		ch <- masterResult{r, err}
	}()
	return ch
}

func writePlanFile(t *testing.T, plan *Plan) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plan.stm")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, WritePlan(f, plan))
	require.NoError(t, f.Close())
	return path
}

// privateTestDir returns a socket directory of mode 0700.
func privateTestDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "sock")
	require.NoError(t, os.Mkdir(dir, 0o700))
	return dir
}

func TestProcessesAnyOrderFrameLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	plan := compileString(t, threeClients)
	planPath := writePlanFile(t, plan)
	dir := privateTestDir(t)
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	names := []string{"a", "b", "c"}
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	// Some clients before the master, some after.
	split := rng.IntN(4)
	var clients []*procClient
	for _, n := range names[:split] {
		clients = append(clients, startClient(t, dir, planPath, n, 0))
	}
	res := startMaster(t, plan, WithDir(dir), WithFrames(40))
	for _, n := range names[split:] {
		clients = append(clients, startClient(t, dir, planPath, n, 0))
	}
	r := waitFor(t, res, "the master")
	require.NoError(t, r.err)
	for _, c := range clients {
		assert.NoError(t, waitFor(t, c.done, "client "+c.name), "client %s: %s", c.name, c)
	}
	require.Len(t, r.run.Runnables, 4)
	for _, rr := range r.run.Runnables {
		assert.Len(t, rr.Seq, 40, rr.Name)
	}
	assert.Equal(t, 40, r.run.Periods)
	pids := map[int]bool{}
	for _, c := range r.run.Clients {
		pids[c.PID] = true
	}
	assert.Len(t, pids, 3, "three processes")
	// Dependencies across processes held in every frame.
	end := map[string][]int64{}
	for _, rr := range r.run.Runnables {
		end[rr.Name] = rr.End
	}
	for _, rr := range r.run.Runnables {
		for i := range rr.Seq {
			if rr.Flags[i]&FlagSkipped != 0 {
				continue
			}
			for _, d := range plan.Runnables()[indexOfRunnable(plan, rr.Name)].Deps {
				assert.LessOrEqual(t, end[d][i], rr.Start[i], "%s frame %d started before %s ended", rr.Name, i, d)
			}
		}
	}
}

func indexOfRunnable(p *Plan, name string) int {
	for i, r := range p.Runnables() {
		if r.Name == name {
			return i
		}
	}
	return -1
}

func TestProcessKilledMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	plan := compileString(t, threeClients)
	planPath := writePlanFile(t, plan)
	dir := privateTestDir(t)
	res := startMaster(t, plan, WithDir(dir), WithLiveness(time.Second))
	// Every survivor's runnable has a row before b dies: a2 and c1 say
	// at their second frame, which they begin once their first is
	// recorded (a2 follows b1, but its thread may start late on a loaded
	// machine: b reaching frame 20 does not mean a2 has run).
	a := startClientSaying(t, dir, planPath, "a", "a2", 2)
	b := startClient(t, dir, planPath, "b", 20)
	c := startClientSaying(t, dir, planPath, "c", "c1", 2)
	waitFor(t, a.said, "a2's second frame")
	waitFor(t, c.said, "c1's second frame")
	waitFor(t, b.said, "client b's 20th frame")
	killed := time.Now()
	require.NoError(t, b.cmd.Process.Kill())
	r := waitFor(t, res, "the master")
	require.ErrorIs(t, r.err, ErrAborted)
	assert.Contains(t, r.err.Error(), "client b (pid")
	// The survivors' records came in: they show the run up to the fault.
	// The dead client's runnables are there too, in plan order, marked
	// lost (they were left out of the record and the analysis).
	got := map[string]bool{}
	var names []string
	for _, rr := range r.run.Runnables {
		names = append(names, rr.Name)
		assert.Equal(t, rr.Client == "b", rr.Lost, rr.Name)
		if rr.Lost {
			assert.Empty(t, rr.Seq, rr.Name)
			continue
		}
		got[rr.Client] = true
		assert.NotEmpty(t, rr.Seq, rr.Name)
	}
	assert.True(t, got["a"] && got["c"], "records of a and c: %v", got)
	var want []string
	for _, pr := range plan.Runnables() {
		want = append(want, pr.Name)
	}
	assert.Equal(t, want, names, "every runnable, in plan order")
	var text strings.Builder
	require.NoError(t, Analyze(r.run).WriteText(&text))
	assert.Contains(t, text.String(), "the records of client b were lost")
	for _, p := range []*procClient{a, c} {
		err := waitFor(t, p.done, "client "+p.name)
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "client %s must fail", p.name)
		assert.Contains(t, p.String(), "client b (pid", "client %s names the dead client", p.name)
	}
	// Within one period plus the bound (the liveness bound, with room
	// for a loaded machine).
	assert.Less(t, time.Since(killed), 5*time.Millisecond+5*time.Second)
}

func TestProcessSIGINTStopsAtBoundary(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	plan := compileString(t, threeClients)
	planPath := writePlanFile(t, plan)
	dir := privateTestDir(t)
	// A generous liveness bound: three race-detector processes on two
	// cores can be slow to start.
	res := startMaster(t, plan, WithDir(dir), WithLiveness(10*time.Second))
	clients := []*procClient{startClient(t, dir, planPath, "a", 0), startClient(t, dir, planPath, "b", 0), startClient(t, dir, planPath, "c", 15)}
	select {
	case <-clients[2].said:
	case <-time.After(20 * time.Second):
		for _, c := range clients {
			c.cmd.Process.Signal(syscall.SIGQUIT)
		}
		for _, c := range clients {
			<-c.done
		}
		t.Fatalf("client c did not reach frame 15:\na: %s\nb: %s\nc: %s", clients[0], clients[1], clients[2])
	}
	require.NoError(t, clients[2].cmd.Process.Signal(syscall.SIGINT))
	r := waitFor(t, res, "the master")
	require.NoError(t, r.err, "a: %s\nb: %s\nc: %s", clients[0], clients[1], clients[2])
	assert.Contains(t, r.run.Stopped, "client c got interrupt")
	for _, c := range clients {
		assert.NoError(t, waitFor(t, c.done, "client "+c.name), "client %s: %s", c.name, c)
	}
	// Every runnable reached the same frames: the stop fell on a boundary.
	assert.GreaterOrEqual(t, assertSamePeriods(t, r.run), 15)
}

func TestRefusedRegistrations(t *testing.T) {
	plan := compileString(t, threeClients)
	dir := privateTestDir(t)
	res := startMaster(t, plan, WithDir(dir), WithFrames(5))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	noop := func(context.Context) error { return nil }
	for _, c := range []struct {
		name string
		regs []string
		want string
	}{
		{"x", []string{"a1"}, `the plan has no client "x"; its clients are a, b, c`},
		{"a", []string{"a1"}, "it did not register a2 (call Runnable for each)"},
		{"a", []string{"a1", "a2", "zz"}, "it registered zz, which the plan does not give client a"},
	} {
		cl, err := NewClient(c.name, WithClientDir(dir))
		require.NoError(t, err)
		for _, r := range c.regs {
			cl.Runnable(r, noop)
		}
		err = cl.EnterScheduler(ctx)
		require.ErrorIs(t, err, ErrRefused, c.name)
		assert.Contains(t, err.Error(), c.want)
	}
	// The master goes on: the right clients run.
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, regs := range [][]string{{"a1", "a2"}, {"b1"}, {"c1"}} {
		cl, _ := NewClient(string(rune('a'+i)), WithClientDir(dir))
		for _, r := range regs {
			cl.Runnable(r, noop)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = cl.EnterScheduler(ctx)
		}()
	}
	wg.Wait()
	r := waitFor(t, res, "the master")
	require.NoError(t, r.err)
	assert.NoError(t, errors.Join(errs...))
	assert.Equal(t, 5, r.run.Periods)
}

// A connection from another user is refused by its peer credentials,
// even when the directory lets it through.
func TestOtherUserRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	plan := compileString(t, threeClients)
	dir := privateTestDir(t)
	logged := make(chan string, 16)
	m, err := NewMaster(plan, WithDir(dir), WithLog(func(s string) { logged <- s }))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := m.Run(ctx); done <- err }()
	for s := range logged {
		if strings.Contains(s, "master: waiting for client") {
			break
		}
	}
	// Open the way for user nobody (65534): the directory, the socket and
	// a copy of this test binary.
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(filepath.Join(dir, sockName), 0o777))
	exe, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "static.test")
	require.NoError(t, os.Chmod(filepath.Dir(bin), 0o755))
	b, err := os.ReadFile(exe)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, b, 0o755))
	for d := filepath.Dir(filepath.Dir(bin)); d != "/" && d != "."; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o005 == 0 {
			os.Chmod(d, st.Mode().Perm()|0o055)
		}
	}
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	cmd := exec.CommandContext(cctx, bin, "-test.run", "^$")
	cmd.Env = append(os.Environ(), "PZ_STM_TEST_DIAL="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "refused: this master runs as user 0")
	for s := range logged {
		if strings.Contains(s, "refused a connection from uid 65534") {
			break
		}
	}
	cancel()
	require.Error(t, <-done) // stopped before the start
}

// A client that stops answering (SIGSTOP) is named by the master; the
// others leave within one period plus the liveness bound.
func TestProcessStoppedClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	plan := compileString(t, threeClients)
	planPath := writePlanFile(t, plan)
	dir := privateTestDir(t)
	const liveness = 2 * time.Second
	res := startMaster(t, plan, WithDir(dir), WithLiveness(liveness))
	a := startClient(t, dir, planPath, "a", 0)
	b := startClient(t, dir, planPath, "b", 10)
	c := startClient(t, dir, planPath, "c", 0)
	waitFor(t, b.said, "client b's 10th frame")
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	r := waitFor(t, res, "the master")
	require.ErrorIs(t, r.err, ErrAborted)
	assert.Contains(t, r.err.Error(), "client b stopped answering: its runnable b1 is")
	for _, p := range []*procClient{a, c} {
		err := waitFor(t, p.done, "client "+p.name)
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "client %s must fail", p.name)
		assert.Contains(t, p.String(), "client b stopped answering", "client %s names the stopped client", p.name)
	}
	// One period plus the bound, with room for a loaded machine.
	assert.Less(t, time.Since(stopped), 5*time.Millisecond+liveness+5*time.Second)
	b.cmd.Process.Signal(syscall.SIGCONT)
	b.cmd.Process.Kill()
}

// A client of an earlier run whose master was killed may still map that
// run's board (a process stopped with SIGSTOP, resumed later). The next
// master on the same directory must not hand its clients that same
// file: the stale client, once it runs, sees its master gone and writes
// the abort word, which aborted the new run while its master reported
// the frame limit and exit status 0 (found in a fault-injection trial:
// master SIGKILLed, a client SIGSTOPped, a new master and clients
// started, then SIGCONT to the old client).
func TestProcessStaleBoardOfAKilledMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	plan := compileString(t, threeClients)
	planPath := writePlanFile(t, plan)
	dir := privateTestDir(t)
	n, nc := len(plan.Runnables()), len(plan.Clients)
	// The killed master's board, and the mapping its stopped client holds.
	old, err := createBoardFile(filepath.Join(dir, boardName), n, nc)
	require.NoError(t, err)
	defer old.close()
	stale, err := openBoardFile(filepath.Join(dir, boardName), n, nc)
	require.NoError(t, err)
	defer stale.close()

	const frames = 60
	res := startMaster(t, plan, WithDir(dir), WithFrames(frames))
	a := startClient(t, dir, planPath, "a", 0)
	b := startClient(t, dir, planPath, "b", 10)
	c := startClient(t, dir, planPath, "c", 0)
	waitFor(t, b.said, "client b's 10th frame")
	// The stale client resumes: its master is gone, so it aborts, and it
	// publishes a frame far ahead.
	stale.abort()
	stale.finish(indexOfRunnable(plan, "a1"), 1000, false)
	r := waitFor(t, res, "the master")
	require.NoError(t, r.err)
	for _, p := range []*procClient{a, b, c} {
		assert.NoError(t, waitFor(t, p.done, "client "+p.name), "client %s: %s", p.name, p)
	}
	for _, rr := range r.run.Runnables {
		assert.Len(t, rr.Seq, frames, rr.Name)
	}
}

// The master reads the board's abort word too: a run aborted by a write
// the master did not make (a process outside the run mapping the board)
// is reported as aborted, not as ended by its frame limit with status 0
// while every client failed.
func TestProcessBoardAbortNotByTheMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	plan := compileString(t, threeClients)
	planPath := writePlanFile(t, plan)
	dir := privateTestDir(t)
	res := startMaster(t, plan, WithDir(dir))
	a := startClient(t, dir, planPath, "a", 0)
	b := startClient(t, dir, planPath, "b", 10)
	c := startClient(t, dir, planPath, "c", 0)
	waitFor(t, b.said, "client b's 10th frame")
	foreign, err := openBoardFile(filepath.Join(dir, boardName), len(plan.Runnables()), len(plan.Clients))
	require.NoError(t, err)
	defer foreign.close()
	foreign.abort()
	r := waitFor(t, res, "the master")
	require.ErrorIs(t, r.err, ErrAborted)
	assert.Contains(t, r.err.Error(), "marked aborted by a process other than its master")
	assert.Contains(t, r.run.Stopped, "marked aborted by a process other than its master")
	for _, p := range []*procClient{a, b, c} {
		err := waitFor(t, p.done, "client "+p.name)
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "client %s must fail", p.name)
		assert.Contains(t, p.String(), "marked aborted by a process other than its master", "client %s says why", p.name)
	}
}

// A master stopped (SIGTERM to pzrun stm master) before every client is
// in tells the clients that have joined why it ends: they said only
// "the master closed the connection before the start: EOF", and the
// master logged that each "left before the start; waiting for it again"
// as it exited (found in a fault-injection trial of pzrun stm master).
func TestProcessMasterStoppedBeforeStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	plan := compileString(t, threeClients)
	planPath := writePlanFile(t, plan)
	dir := privateTestDir(t)
	var logMu sync.Mutex
	var logs []string
	joined := make(chan struct{}, 4)
	m, err := NewMaster(plan, WithDir(dir), WithLog(func(s string) {
		t.Log(s)
		logMu.Lock()
		logs = append(logs, s)
		logMu.Unlock()
		if strings.Contains(s, "joined") {
			joined <- struct{}{}
		}
	}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan error, 1)
	go func() { _, err := m.Run(ctx); done <- err }()
	a := startClient(t, dir, planPath, "a", 0)
	waitFor(t, joined, "client a to join")
	cancel(errors.New("pzrun: terminated received"))
	err = waitFor(t, done, "the master")
	require.ErrorContains(t, err, "the run did not start: pzrun: terminated received")
	cerr := waitFor(t, a.done, "client a")
	var ee *exec.ExitError
	require.ErrorAs(t, cerr, &ee, "client a must fail")
	assert.Contains(t, a.String(), "the master was stopped before the run started (pzrun: terminated received)")
	logMu.Lock()
	defer logMu.Unlock()
	for _, s := range logs {
		assert.NotContains(t, s, "waiting for it again")
	}
}

// CheckClient accepts the plan's clients and names the one a misspelt
// name likely means; a name far from all of them gets the list only.
func TestPlanCheckClient(t *testing.T) {
	p := compileString(t, `
hyperepochs:
  - name: main
    period: 5ms
    resources: [cpu0]
    epochs: [{name: frame}]
clients: [camera, planner]
runnables:
  - {name: grab, client: camera, resource: cpu0, wcet: 100us}
  - {name: plan, client: planner, resource: cpu0, wcet: 100us, deps: [grab]}
`)
	require.NoError(t, p.CheckClient("camera"))
	require.NoError(t, p.CheckClient("planner"))
	assert.EqualError(t, p.CheckClient("camra"), `the plan has no client "camra"; its clients are camera, planner; did you mean "camera"?`)
	assert.EqualError(t, p.CheckClient("plnaner"), `the plan has no client "plnaner"; its clients are camera, planner; did you mean "planner"?`)
	assert.EqualError(t, p.CheckClient("x"), `the plan has no client "x"; its clients are camera, planner`)
	assert.EqualError(t, p.CheckClient(""), `the plan has no client ""; its clients are camera, planner`)
}
