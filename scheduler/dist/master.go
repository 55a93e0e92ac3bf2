package dist

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler"
)

// ErrUnknownCodelet: a codelet that is not registered on every rank.
var ErrUnknownCodelet = errors.New("dist: codelet not registered on every rank")

// A Registry names the codelets that tasks may run on any rank: in
// master/worker mode (RunMaster) a task travels by its codelet's name, and
// the worker rank runs its own codelet of that name. Every rank builds its
// registry before RunMaster.
type Registry struct {
	byName map[string]*scheduler.Codelet
	// argTypes are the named types of task arguments, by argTypeName
	// (RegisterArgTypes).
	argTypes map[string]reflect.Type
}

// NewRegistry returns a registry of cls, which need distinct, non-empty
// names and CPU implementations.
func NewRegistry(cls ...*scheduler.Codelet) (*Registry, error) {
	r := &Registry{byName: map[string]*scheduler.Codelet{}}
	for _, cl := range cls {
		switch {
		case cl == nil || cl.Name == "":
			return nil, fmt.Errorf("dist: NewRegistry: %w: a codelet without a name", comm.ErrInvalidArg)
		case cl.CPU == nil:
			return nil, fmt.Errorf("dist: NewRegistry: %w: codelet %q has no CPU implementation", comm.ErrInvalidArg, cl.Name)
		case r.byName[cl.Name] != nil:
			return nil, fmt.Errorf("dist: NewRegistry: %w: two codelets named %q", comm.ErrInvalidArg, cl.Name)
		}
		r.byName[cl.Name] = cl
	}
	return r, nil
}

func (r *Registry) names() []string {
	out := make([]string, 0, len(r.byName))
	for n := range r.byName {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// A Master is the submitting side of master/worker mode: a node-local
// scheduler whose workers are this rank's cores plus one proxy worker per
// core of every other rank. A task a proxy worker takes is sent, with its
// data, to that worker's rank, run there by the codelet of the same name,
// and its written data sent back; the policy sees every core of the job
// as a worker of this one scheduler. Register data with Local() and submit
// with Submit.
type Master struct {
	// ctx is RunMaster's, ended also when fn fails (gaveUp): once it
	// ends, tasks that have not started do not start, and remote tasks
	// stop waiting for their results.
	ctx     context.Context
	parent  context.Context // RunMaster's own
	local   *scheduler.Scheduler
	c       comm.Comm
	reg     *Registry
	wrapped map[string]*scheduler.Codelet
	missing map[string][]int // codelet name -> ranks without it
	nlocal  int
	proxies []proxy // by worker id - nlocal
	// links are the master's links to the worker ranks, by rank (nil
	// at the master's): the cost dmda sees of a proxy's task.
	links []*rankLink
	// missingTypes: registered argument type name -> ranks without it.
	missingTypes map[string][]int
	// argDescs caches, by reflect.Type, the argDesc of the task
	// arguments of that type.
	argDescs sync.Map
	// returned is set when RunMaster has closed the master's scheduler:
	// Submit and WaitAll then return scheduler.ErrClosed.
	returned atomic.Bool
	// cache is the master's view of the read-only data each worker
	// rank keeps between tasks (master_cache.go).
	cache *masterCache
	// peers count the task buffers sent to and received from each rank
	// (PeerStats).
	peers []peerCounts
}

// proxy is a worker of the master that stands for one core of a rank.
type proxy struct {
	rank int
	tag  int // the slot's tag: its task and result messages
	mu   sync.Mutex
	// broken is why the slot's messages are out of step (a task whose
	// result the master stopped waiting for): it takes no more tasks.
	broken error
	// running is the task the slot's rank runs for the master now, nil
	// between tasks: a WaitAll that gives up names it.
	running atomic.Pointer[remoteTask]
}

// remoteTask is a task in flight on another rank, as a failed wait
// names it.
type remoteTask struct {
	what  string // the codelet and its data: "work" RW(handle "x")
	since time.Time
}

// taskHeader describes a task sent to a worker rank, or, with Stop, ends
// the slot.
type taskHeader struct {
	Stop bool
	// Fail, with Stop, is the master's failure before its function ran
	// (stopWorkers from RunMaster's start-up): the worker rank's
	// RunMaster returns an error naming it.
	Fail    string
	Codelet string
	Modes   []uint8
	Types   []uint8 // comm.Datatype of each buffer
	Shapes  [][3]int
	// Same is, for each buffer, the index of the task's first buffer of
	// the same handle (its own index for the first): a handle named
	// twice travels once and is one handle on the worker rank too.
	Same []int
	// ArgType describes the Go type of the task's argument (see
	// master_argtype.go), "" for none; Arg is its value, encoded.
	ArgType string
	Arg     []byte
	// Held is, for each buffer, the id of the rank's copy it reads
	// (not sent), 0 for one sent; Keep the id under which the rank
	// keeps a buffer sent, 0 for one it does not keep; Evict the ids of
	// the copies the rank drops before the task (master_cache.go).
	Held, Keep []uint64
	Evict      []uint64
}

// resultHeader is a worker rank's answer.
type resultHeader struct {
	Err string
	// ComputeNs is the time the task's codelet ran on the worker rank,
	// without the transfers, for the master's performance model.
	ComputeNs int64
}

const (
	slotTagBase = 1 << 20         // slot tags; below are free
	stopTag     = slotTagBase - 1 // the master's stop, one message per worker rank
	// stopTimeout bounds the sending of the stop messages, which must
	// be sent also when the master's context has ended.
	stopTimeout = 30 * time.Second
)

// errMasterFailed ends the master's tasks that have not started when the
// master's function returned an error or panicked.
var errMasterFailed = errors.New("the master's function returned an error")

// errStopped is the cause of a worker rank's serving context once the
// master has stopped it.
var errStopped = errors.New("dist: the master stopped its workers")

// errMasterStart marks a worker rank's error when the master failed
// before its function ran (taskHeader.Fail).
var errMasterStart = errors.New("the master failed to start")

// RunMaster runs fn on rank root with a Master whose workers are the cores
// of every rank of c; the other ranks serve the master's tasks until fn
// returns. It is collective: every rank calls it with its own registry
// (the codelets known by name on that rank) and local scheduler options
// (scheduler.WithWorkers sets how many cores a rank offers). A task whose
// codelet some rank lacks is refused at Submit, naming the ranks. Every
// rank must pass the same root: ranks that do not all return an error
// wrapping comm.ErrInvalidArg naming the ranks and their roots.
//
// The master's scheduler (Master.Local) records the whole job: its
// Stats and trace have a worker per core of every rank (Master.RankOf
// says whose). PZ_TRACE is read on the root only: the worker ranks'
// schedulers write no trace, which would overwrite the master's.
//
// Task arguments (scheduler.WithArg) arrive on every rank with the Go
// type given to WithArg: the master sends, beside the encoded value, a
// description of its type, and the worker rank decodes the value into
// that type, so that c.Arg.(int) or c.Arg.(Params) holds on every rank.
// Types built of Go's predeclared types (bool, ints, uints, floats,
// complex, string, any) with slices, arrays, maps and pointers travel
// as they are; named types (structs, type Celsius float64), and
// composites of them, travel once every rank has registered them
// (Registry.RegisterArgTypes): Submit refuses an argument of an
// unregistered named type, naming it. Interface values inside an
// argument (a field of type Shape or any, []any, map[string]any) arrive
// with their dynamic types, which follow the same rule: Submit refuses
// one of an unregistered type, naming the field and the type.
//
// When ctx ends, the master's tasks that have not started are not run
// (they fail with ctx's error), the master stops waiting for the results
// of the tasks running on other ranks (those results are dropped), and
// RunMaster returns ctx's error once the tasks running on the master's
// own cores return. When fn returns an error or panics, the same
// happens to the tasks it submitted (fn gave up on them: they are not
// run, and RunMaster returns fn's error, or the panic as an error with
// its stack, without waiting for the rest of the graph). The worker
// ranks are stopped on every path.
//
// Threads: the goroutines that exchange the tasks (on the master its
// proxies, which send a task and wait for its result, one per core of
// the other ranks; on a worker rank its slots, which receive the tasks
// and send their results back) need a P while the rank's workers
// compute, or they run only when a computing worker is preempted, every
// 10 ms or so: under mpirun each rank's GOMAXPROCS is its share of the
// cores, which its workers take whole (one P with 2 ranks on 2 cores),
// and mpirun -n 2 of examples/sweep on 2 cores ran at 1.25x the
// sequential loop, rank 1 running 53 of 257 tasks. So while RunMaster
// runs, a rank whose workers take every P (GOMAXPROCS at most its
// workers) and that exchanges tasks with other ranks raises GOMAXPROCS
// by one, and puts it back when RunMaster returns (unless something
// else changed it meanwhile): the same run is 1.57x, rank 1 running
// 106-110 tasks (docs/distributed.md). Both sides need it: the
// master's spare P alone or rank 1's alone did not help. That P's
// thread shares a core with the workers: it costs them the time the
// exchanges take (MPI's waits poll), which is less than a core given up
// (StarPU's MPI master reserves one for its communication thread), and
// a rank offers the same workers as before. RunMaster leaves
// GOMAXPROCS alone when the user set it (the GOMAXPROCS environment
// variable), when the rank's workers leave a P free already (as
// in-process ranks sharing GOMAXPROCS do), and when EnvMasterSpareP is
// "0".
//
// On a worker rank RunMaster returns nil when the master stopped it: the
// failure of a task it ran for the master is the master's (that task's
// error, naming the rank), not the worker rank's. It returns an error for
// the worker rank's own failures: its scheduler, the communicator, or
// its ctx ending before the master stopped it, or the master's own
// failure to start (its scheduler, or the measurement of the links to
// the worker ranks), which every worker rank's RunMaster returns, naming
// it, as soon as the master tells it.
func RunMaster(ctx context.Context, c comm.Comm, root int, reg *Registry, opts []scheduler.Option, fn func(ctx context.Context, m *Master) error) (err error) {
	if root < 0 || root >= c.Size() {
		return fmt.Errorf("dist: RunMaster: %w: root %d of %d ranks", ErrBadRank, root, c.Size())
	}
	if reg == nil {
		return fmt.Errorf("dist: RunMaster: %w: a registry is required", comm.ErrInvalidArg)
	}
	dc, err := c.Dup(ctx)
	if err != nil {
		return fmt.Errorf("dist: RunMaster: %w", err)
	}
	defer func() {
		if ferr := dc.Free(); ferr != nil && err == nil {
			err = fmt.Errorf("dist: RunMaster: %w", ferr)
		}
	}()
	// This scheduler serves the master on a worker rank, and only counts
	// the cores on the root: PZ_TRACE is for the master's scheduler,
	// whose workers are every rank's cores. A worker rank's would write
	// its own trace to the same file after the master's (it closes last).
	// Options of the caller's, WithGetenv and WithTrace, come after and
	// win.
	ls, err := scheduler.New(ctx, append([]scheduler.Option{scheduler.WithGetenv(envWithoutTrace)}, opts...)...)
	if err != nil {
		return fmt.Errorf("dist: RunMaster: rank %d: %w", c.Rank(), err)
	}
	cores := len(ls.Workers())
	offers, err := comm.AllGatherValues(ctx, dc, offer{cores, reg.names(), root, reg.argTypeNames()})
	if err != nil {
		_ = ls.Close()
		return fmt.Errorf("dist: RunMaster: rank %d: %w", c.Rank(), err)
	}
	if err := sameRoot(offers); err != nil {
		_ = ls.Close()
		return fmt.Errorf("dist: RunMaster: rank %d: %w", c.Rank(), err)
	}
	if c.Rank() != root {
		// The slots need a P while this rank's cores compute
		// (RunMaster's doc, "Threads"). A bad EnvMasterSpareP fails the
		// master, which tells this rank.
		spare, _ := spareOption(os.Getenv)
		defer raiseSpareP(offers[c.Rank()].Cores, spare, os.Getenv("GOMAXPROCS")).Restore()
		// serve answers the master's pings (measureLinks) first.
		serr := serve(ctx, dc, root, reg, ls, offers[c.Rank()].Cores, slotBase(offers, root, c.Rank()))
		return errors.Join(serr, ls.Close())
	}
	// The master's scheduler: its own cores, then the proxies. A failure
	// here stops the worker ranks too, telling them why: they wait for
	// the pings, or for their first task.
	if err := ls.Close(); err != nil {
		err = fmt.Errorf("dist: RunMaster: master rank %d: %w", root, err)
		stopWorkers(ctx, dc, taskHeader{Stop: true, Fail: err.Error()})
		return err
	}
	spare, err := spareOption(os.Getenv)
	if err != nil {
		err = fmt.Errorf("dist: RunMaster: master rank %d: %w", root, err)
		stopWorkers(ctx, dc, taskHeader{Stop: true, Fail: err.Error()})
		return err
	}
	links, err := measureLinks(ctx, dc, root)
	if err != nil {
		err = fmt.Errorf("dist: RunMaster: master rank %d: %w", root, err)
		stopWorkers(ctx, dc, taskHeader{Stop: true, Fail: err.Error()})
		return err
	}
	mctx, gaveUp := context.WithCancelCause(ctx)
	defer gaveUp(nil)
	m := &Master{ctx: mctx, parent: ctx, c: dc, reg: reg, nlocal: cores, wrapped: map[string]*scheduler.Codelet{}, missing: map[string][]int{}, missingTypes: map[string][]int{}, links: links,
		cache: newMasterCache(dc.Size()), peers: make([]peerCounts, dc.Size())}
	wl := map[int]scheduler.WorkerLink{}
	// Traces and charts name every worker after its rank and its core
	// there: "rank 0 cpu1" is the master's second core, "rank 2 cpu0"
	// the first core of rank 2.
	names := map[int]string{}
	for w := range cores {
		names[w] = fmt.Sprintf("rank %d cpu%d", root, w)
	}
	for r, o := range offers {
		if r == root {
			continue
		}
		base := slotBase(offers, root, r)
		for s := range o.Cores {
			names[cores+len(m.proxies)] = fmt.Sprintf("rank %d cpu%d", r, s)
			wl[cores+len(m.proxies)] = heldLink{links[r], m.cache, r}
			m.proxies = append(m.proxies, proxy{rank: r, tag: slotTagBase + base + s})
		}
		for _, name := range reg.names() {
			if _, ok := slices.BinarySearch(o.Names, name); !ok {
				m.missing[name] = append(m.missing[name], r)
			}
		}
		for name := range reg.argTypes {
			if !slices.Contains(o.ArgTypes, name) {
				m.missingTypes[name] = append(m.missingTypes[name], r)
			}
		}
	}
	total := append([]scheduler.Option{}, opts...)
	total = append(total, scheduler.WithWorkers(cores+len(m.proxies)), scheduler.WithWorkerLinks(wl), scheduler.WithWorkerNames(names))
	if m.local, err = scheduler.New(ctx, total...); err != nil {
		m.stop(ctx)
		return fmt.Errorf("dist: RunMaster: %w", err)
	}
	for name, cl := range reg.byName {
		m.wrapped[name] = m.wrap(cl)
	}
	if len(m.proxies) > 0 {
		// The proxies need a P while the master's cores compute
		// (RunMaster's doc, "Threads").
		defer raiseSpareP(cores, spare, os.Getenv("GOMAXPROCS")).Restore()
	}
	ferr := callMaster(ctx, m, fn)
	if ferr != nil {
		// The program gave up: what it submitted and has not started
		// does not run (as when ctx ends), so that the worker ranks are
		// stopped now rather than after the rest of the graph.
		gaveUp(errMasterFailed)
	}
	werr := m.local.WaitAll(ctx)
	cerr := m.local.Close()
	m.returned.Store(true)
	m.stop(ctx)
	switch {
	case ferr != nil:
		return ferr
	case (werr != nil || cerr != nil) && ctx.Err() != nil:
		// The tasks' errors are those of tasks not started or dropped
		// because ctx ended: that is the error.
		return fmt.Errorf("dist: RunMaster: master rank %d: %w", root, context.Cause(ctx))
	}
	return errors.Join(werr, cerr)
}

// callMaster calls fn, returning a panic as an error with its stack, so
// that RunMaster closes the master's scheduler and stops the worker
// ranks on every path.
func callMaster(ctx context.Context, m *Master, fn func(ctx context.Context, m *Master) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("dist: RunMaster: master rank %d: fn panicked: %v\n%s", m.c.Rank(), r, debug.Stack())
		}
	}()
	return fn(ctx, m)
}

// sameRoot checks that every rank passed the same root to RunMaster.
func sameRoot(offers []offer) error {
	for _, o := range offers {
		if o.Root != offers[0].Root {
			roots := make([]string, len(offers))
			for i, o := range offers {
				roots[i] = fmt.Sprintf("rank %d root %d", i, o.Root)
			}
			return fmt.Errorf("%w: the ranks pass different roots (%s); pass every rank the same root", comm.ErrInvalidArg, strings.Join(roots, ", "))
		}
	}
	return nil
}

// offer is what a rank brings to master/worker mode.
type offer struct {
	Cores int      // its workers
	Names []string // its codelets, sorted
	Root  int      // the root it passed
	// ArgTypes are the names of its registered argument types.
	ArgTypes []string
}

// slotBase numbers rank r's slots after those of the ranks before it.
func slotBase(offers []offer, root, r int) int {
	base := 0
	for i := range r {
		if i != root {
			base += offers[i].Cores
		}
	}
	return base
}

// Local is the master's scheduler: register data with it, and read
// Workers, Stats and traces from it. Submit tasks with Master.Submit.
func (m *Master) Local() *scheduler.Scheduler { return m.local }

// Workers is the number of workers: this rank's cores and every other
// rank's.
func (m *Master) Workers() int { return m.nlocal + len(m.proxies) }

// RankOf returns the rank whose core Local()'s worker w runs on: the
// master's own rank for its first workers (its cores), then the other
// ranks' in rank order, one worker per core. With it a program can
// count, from Local().Stats(), the tasks each rank ran, or make a
// context of one rank's workers (scheduler.ContextWorkers) to keep tasks
// there. It returns -1 for a w that is not a worker.
func (m *Master) RankOf(w int) int {
	switch {
	case w < 0 || w >= m.Workers():
		return -1
	case w < m.nlocal:
		return m.c.Rank()
	}
	return m.proxies[w-m.nlocal].rank
}

// Submit submits a task of cl, a codelet of the registry (the same
// *scheduler.Codelet), which may run on any rank, where the codelet of
// that name runs it. Its data are handles of Local() holding slices of
// numbers (vectors or matrices). It is refused if a rank lacks the
// codelet, or if cl is another codelet than the registry's of its name.
// A task argument (scheduler.WithArg) of a type that cannot cross ranks
// is refused, wrapping comm.ErrInvalidArg and naming the type: a named
// type that some rank has not registered (Registry.RegisterArgTypes),
// or a func, channel, unnamed struct or uintptr (see RunMaster).
// Once RunMaster has returned, it returns an error wrapping
// scheduler.ErrClosed, as WaitAll does.
func (m *Master) Submit(ctx context.Context, cl *scheduler.Codelet, args ...scheduler.Arg) error {
	if cl == nil {
		return fmt.Errorf("dist: Master.Submit: %w: nil codelet (argument cl); pass one of the registry's codelets", comm.ErrInvalidArg)
	}
	w, ok := m.wrapped[cl.Name]
	if !ok {
		return fmt.Errorf("dist: submitting %q: %w: it is not in the master's registry; pass it to dist.NewRegistry on every rank before RunMaster", cl.Name, ErrUnknownCodelet)
	}
	if m.reg.byName[cl.Name] != cl {
		// Tasks run the registered codelet of that name, on every rank:
		// another one that shares its name would silently not run.
		return fmt.Errorf("dist: submitting %q: %w: the registry holds another codelet of that name; submit the registered one (the *scheduler.Codelet passed to dist.NewRegistry), or register this one under a name of its own", cl.Name, ErrUnknownCodelet)
	}
	if ranks := m.missing[cl.Name]; len(ranks) > 0 {
		return fmt.Errorf("dist: submitting %q: %w: ranks %v have no codelet of that name; pass it to dist.NewRegistry on every rank, not only on the master", cl.Name, ErrUnknownCodelet, ranks)
	}
	if err := m.afterRun("Submit"); err != nil {
		return err
	}
	if err := m.checkArg(argValue(args)); err != nil {
		return fmt.Errorf("dist: submitting %q: %w: %w", cl.Name, comm.ErrInvalidArg, err)
	}
	return m.local.Submit(ctx, w, args...)
}

// afterRun is the error of call on a Master whose RunMaster has
// returned, nil before.
func (m *Master) afterRun(call string) error {
	if m.returned.Load() {
		return fmt.Errorf("dist: Master.%s: %w: RunMaster has returned (its scheduler is closed and the worker ranks stopped); call it within RunMaster's fn", call, scheduler.ErrClosed)
	}
	return nil
}

// WaitAll waits for every task submitted so far. When ctx ends first,
// its error names the tasks still running on other ranks, with their
// ranks and for how long they have run there: a task stuck on a worker
// rank shows up as the one the deadline passed in. Once RunMaster has
// returned, WaitAll, like Submit, returns an error wrapping
// scheduler.ErrClosed: the Master is valid within RunMaster's fn only.
func (m *Master) WaitAll(ctx context.Context) error {
	if err := m.afterRun("WaitAll"); err != nil {
		return err
	}
	err := m.local.WaitAll(ctx)
	if err == nil || ctx.Err() == nil {
		return err
	}
	if running := m.runningRemote(); running != "" {
		return fmt.Errorf("%w; still running on other ranks: %s", err, running)
	}
	return err
}

// runningRemote describes the tasks the worker ranks run for the master
// now, in worker order, or "" when none does.
func (m *Master) runningRemote() string {
	var out []string
	now := time.Now()
	for i := range m.proxies {
		p := &m.proxies[i]
		if rt := p.running.Load(); rt != nil {
			out = append(out, fmt.Sprintf("rank %d (worker %d): task %s for %v", p.rank, m.nlocal+i, rt.what, now.Sub(rt.since).Round(time.Millisecond)))
		}
	}
	return strings.Join(out, "; ")
}

// describeRemote names c's task as a failed wait does: its codelet and
// each access's mode and handle.
func describeRemote(c *scheduler.Call, name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q", name)
	for _, a := range c.Task.Access {
		fmt.Fprintf(&b, " %v(%v)", a.Mode, a.Handle)
	}
	return b.String()
}

// envWithoutTrace reads the environment as the scheduler does, without
// PZ_TRACE: the worker ranks' schedulers of RunMaster write no trace.
func envWithoutTrace(k string) string {
	if k == "PZ_TRACE" {
		return ""
	}
	return os.Getenv(k)
}

// wrap makes cl's master-side codelet: on the master's own workers it runs
// cl, on a proxy it runs the task on the proxy's rank.
func (m *Master) wrap(cl *scheduler.Codelet) *scheduler.Codelet {
	w := *cl
	w.CPU = func(c *scheduler.Call) error {
		// The parent first: m.ctx learns of its end only once the
		// goroutine that cancels the parent has reached m.ctx among the
		// parent's children, and a worker can run many tasks meanwhile
		// (38 in TestMasterContextEnds on a loaded machine).
		if m.parent.Err() != nil {
			return fmt.Errorf("not started: RunMaster's context ended: %w", context.Cause(m.parent))
		}
		if m.ctx.Err() != nil {
			return fmt.Errorf("not started: %w", context.Cause(m.ctx))
		}
		// A task that writes a handle makes every rank's copy of it
		// stale, before it writes.
		m.written(c)
		if c.Worker < m.nlocal {
			return cl.CPU(c)
		}
		compute, err := m.remote(c, cl.Name)
		if err == nil {
			// The model records the task's compute time; the
			// proxy's link prices the transfers.
			c.SetModelTime(max(compute, 1))
		}
		return err
	}
	return &w
}

// remote runs the task of call c on the rank of its proxy worker and
// returns the time the task computed there. It times the task's
// transfers for the rank's link (rankLink.observe).
func (m *Master) remote(c *scheduler.Call, name string) (time.Duration, error) {
	p := &m.proxies[c.Worker-m.nlocal]
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken != nil {
		return 0, fmt.Errorf("rank %d's slot %d takes no more tasks: %w", p.rank, p.tag-slotTagBase, p.broken)
	}
	p.running.Store(&remoteTask{what: describeRemote(c, name), since: time.Now()})
	defer p.running.Store(nil)
	// Sending a task is not interrupted (the slot would take the next
	// message for the rest of it): the slot's peer takes it or the
	// communicator breaks. Waiting for the result ends with m.ctx.
	sctx := context.WithoutCancel(m.ctx)
	h := taskHeader{Codelet: name, Same: sameHandles(c.Task.Access)}
	if c.Arg != nil {
		desc, b, err := m.encodeArg(c.Arg)
		if err != nil {
			return 0, fmt.Errorf("sending the task to rank %d: %w", p.rank, err)
		}
		h.ArgType, h.Arg = desc, b
	}
	bufs := make([]comm.Buf, c.Len())
	unpacks := make([]func(), c.Len())
	regions := make([]region, c.Len())
	for i := range c.Len() {
		h.Modes = append(h.Modes, uint8(c.Task.Access[i].Mode))
		rows, cols, ld := c.Dims(i)
		if f := h.Same[i]; f != i {
			h.Types = append(h.Types, h.Types[f])
			h.Shapes = append(h.Shapes, h.Shapes[f])
			continue
		}
		b, unpack, err := packBuf(c.Data(i), rows, cols, ld)
		if err != nil {
			return 0, fmt.Errorf("sending the task to rank %d: buffer %d: %w", p.rank, i, err)
		}
		bufs[i], unpacks[i] = b, unpack
		regions[i] = dataRegion(c.Data(i), rows, cols, ld)
		h.Types = append(h.Types, uint8(b.Type))
		h.Shapes = append(h.Shapes, [3]int{rows, cols, ld})
	}
	modes := groupModes(h)
	plan := m.cache.plan(p.rank, c.Task.Access, h.Same, modes, bufs, regions)
	h.Held, h.Keep, h.Evict = plan.held, plan.keep, plan.evict
	t0 := time.Now()
	if err := comm.SendValue(sctx, m.c, h, p.rank, p.tag); err != nil {
		m.cache.done(p.rank, plan, false, false)
		return 0, fmt.Errorf("sending the task to rank %d: %w", p.rank, err)
	}
	var in, out int64
	peer := &m.peers[p.rank]
	for i, b := range bufs {
		if h.Same[i] != i || modes[i] == scheduler.ModeScratch || h.Held[i] != 0 {
			continue
		}
		in += int64(len(b.Bytes))
		if err := m.c.Send(sctx, b, p.rank, p.tag); err != nil {
			m.cache.done(p.rank, plan, true, false)
			return 0, fmt.Errorf("sending buffer %d to rank %d: %w", i, p.rank, err)
		}
		peer.msgsSent.Add(1)
		peer.bytesSent.Add(int64(len(b.Bytes)))
	}
	defer m.cache.done(p.rank, plan, true, true)
	res, _, err := comm.RecvValue[resultHeader](m.ctx, m.c, p.rank, p.tag)
	if err != nil {
		return 0, p.fail(m.ctx, fmt.Errorf("the result from rank %d: %w", p.rank, err))
	}
	if res.Err != "" {
		return 0, fmt.Errorf("on rank %d: %s", p.rank, res.Err)
	}
	for i, b := range bufs {
		if h.Same[i] != i || !writes(modes[i]) {
			continue
		}
		if _, err := m.c.Recv(m.ctx, b.Type, p.rank, p.tag, func(n int) ([]byte, error) { return b.Bytes, nil }); err != nil {
			return 0, p.fail(m.ctx, fmt.Errorf("buffer %d from rank %d: %w", i, p.rank, err))
		}
		unpacks[i]()
		out += int64(len(b.Bytes))
		peer.msgsRecv.Add(1)
		peer.bytesRecv.Add(int64(len(b.Bytes)))
	}
	compute := time.Duration(res.ComputeNs)
	if l := m.links[p.rank]; l != nil {
		l.observe(in, out, float64(time.Since(t0)-compute))
	}
	return compute, nil
}

// fail returns err, marking the slot broken if the master stopped
// waiting for its messages because ctx ended.
func (p *proxy) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		p.broken = err
	}
	return err
}

// sameHandles returns, for each access, the index of the first access of
// the same handle (Scratch accesses, private buffers, stand alone).
func sameHandles(acc []scheduler.Access) []int {
	same := make([]int, len(acc))
	for i, a := range acc {
		same[i] = i
		if a.Mode == scheduler.ModeScratch {
			continue
		}
		for j := range i {
			if acc[j].Handle == a.Handle && acc[j].Mode != scheduler.ModeScratch {
				same[i] = j
				break
			}
		}
	}
	return same
}

// groupModes returns, at each first access of a handle, the union of the
// modes of the task's accesses of that handle.
func groupModes(h taskHeader) []scheduler.Mode {
	modes := make([]scheduler.Mode, len(h.Modes))
	for i, md := range h.Modes {
		modes[h.Same[i]] |= scheduler.Mode(md)
	}
	return modes
}

// stop ends every worker rank's slots and waits for each worker rank to
// acknowledge: once it has, that rank's RunMaster returns nil whatever
// happens to the master next (a master that returns an error breaks an
// in-process world, which a worker rank that had not yet taken its stop
// would report as its own failure). It sends and waits with a bounded
// context of its own: the master's may have ended, and the worker ranks
// wait for the stop however long it takes. A worker rank that failed
// does not acknowledge; its failure is its own RunMaster's error.
func (m *Master) stop(ctx context.Context) {
	stopWorkers(ctx, m.c, taskHeader{Stop: true})
}

// stopWorkers sends h, a stop, to every worker rank of c and waits for
// their answers, within stopTimeout also when ctx has ended.
func stopWorkers(ctx context.Context, c comm.Comm, h taskHeader) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	sent := make([]bool, c.Size())
	for r := range c.Size() {
		if r != c.Rank() {
			sent[r] = comm.SendValue(sctx, c, h, r, stopTag) == nil
		}
	}
	for r, ok := range sent {
		if ok {
			_, _, _ = comm.RecvValue[bool](sctx, c, r, stopTag)
		}
	}
}

// writes reports whether a task's buffer in mode goes back to the master.
func writes(m scheduler.Mode) bool {
	return m&(scheduler.ModeW|scheduler.ModeRedux) != 0
}

// serve answers the master's pings (echoPings), then runs the master's
// tasks on this rank's slots until it stops them (a message on stopTag).
// Stopped, it returns nil: a task that failed here is the master's
// failure, reported to it. A stop that tells the master's failure to
// start (taskHeader.Fail), which may come during the pings, is returned.
func serve(ctx context.Context, c comm.Comm, root int, reg *Registry, ls *scheduler.Scheduler, slots, base int) error {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	var stopErr error
	wg.Go(func() {
		// Waiting for the stop is idle by design, however long the
		// master takes: no stall report, no timeout.
		h, _, err := comm.RecvValue[taskHeader](comm.Idle(sctx), c, root, stopTag)
		if err == nil {
			if h.Fail != "" {
				cancel(fmt.Errorf("dist: RunMaster: rank %d: %w: %s", c.Rank(), errMasterStart, h.Fail))
			} else {
				cancel(errStopped)
			}
			// The master waits for this before it returns (Master.stop).
			actx, done := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
			_ = comm.SendValue(actx, c, true, root, stopTag)
			done()
			return
		}
		if sctx.Err() == nil || !errors.Is(context.Cause(sctx), errSlotsEnded) {
			stopErr = fmt.Errorf("dist: serving the master: rank %d: waiting for its stop: %w", c.Rank(), err)
			cancel(stopErr)
		}
	})
	if err := echoPings(sctx, c, root); err != nil {
		if cause := context.Cause(sctx); errors.Is(cause, errMasterStart) {
			wg.Wait()
			return cause
		}
		cancel(errSlotsEnded)
		wg.Wait()
		return errors.Join(fmt.Errorf("dist: RunMaster: rank %d: %w", c.Rank(), err), stopErr)
	}
	errs := make([]error, slots)
	var sg sync.WaitGroup
	held := newHeldData(ls) // the rank's copies, shared by its slots
	for s := range slots {
		sg.Go(func() { errs[s] = serveSlot(ctx, sctx, c, root, reg, ls, held, slotTagBase+base+s) })
	}
	sg.Wait()
	held.close(ctx)
	// Slots that failed on their own end the wait for the stop. A broken
	// communicator ends it by itself, after the stop if the master sent
	// it before returning (in-process, its queued message still matches).
	if !allBroken(errs) {
		cancel(errSlotsEnded) // a no-op once stopped
	}
	wg.Wait()
	switch cause := context.Cause(sctx); {
	case errors.Is(cause, errStopped):
		return nil
	case errors.Is(cause, errMasterStart):
		// Told after the pings, before the first task.
		return cause
	}
	return errors.Join(append(errs, stopErr)...)
}

// allBroken reports whether every error of errs that is not nil is the
// communicator's breaking.
func allBroken(errs []error) bool {
	for _, err := range errs {
		if err != nil && !errors.Is(err, comm.ErrBroken) {
			return false
		}
	}
	return true
}

// errSlotsEnded ends the wait for the master's stop when the slots ended
// first (on a failure).
var errSlotsEnded = errors.New("dist: the slots ended")

// serveSlot serves one slot: it receives and answers under sctx, which
// the master's stop cancels, and runs tasks under ctx, so that a running
// task completes (its result is then dropped).
func serveSlot(ctx, sctx context.Context, c comm.Comm, root int, reg *Registry, ls *scheduler.Scheduler, held *heldData, tag int) error {
	run := newSlotRunner(reg)
	var pool slotBufs
	fail := func(err error) error {
		if errors.Is(context.Cause(sctx), errStopped) {
			return nil
		}
		return fmt.Errorf("dist: serving the master: rank %d: %w", c.Rank(), err)
	}
	for {
		// Waiting for the master's next task is idle by design, however
		// long the master takes: no stall report, no timeout.
		h, _, err := comm.RecvValue[taskHeader](comm.Idle(sctx), c, root, tag)
		if err != nil {
			return fail(err)
		}
		if h.Stop {
			return nil
		}
		if len(h.Same) != len(h.Modes) || len(h.Types) != len(h.Modes) || len(h.Shapes) != len(h.Modes) || len(h.Held) != len(h.Modes) || len(h.Keep) != len(h.Modes) {
			return fail(fmt.Errorf("%w: a task header of %d modes, %d types, %d shapes, %d aliases, %d held, %d kept", comm.ErrInvalidArg, len(h.Modes), len(h.Types), len(h.Shapes), len(h.Same), len(h.Held), len(h.Keep)))
		}
		if err := held.drop(sctx, h.Evict); err != nil {
			return fail(err)
		}
		modes := groupModes(h)
		bufs := make([]comm.Buf, len(h.Modes))
		datas := make([]any, len(h.Modes))
		kept := make([]*scheduler.Handle, len(h.Modes)) // the rank's copies' handles
		for i := range h.Modes {
			if h.Same[i] != i {
				continue // the first buffer of its handle
			}
			sh := h.Shapes[i]
			dt := comm.Datatype(h.Types[i])
			if modes[i] == scheduler.ModeScratch {
				datas[i], bufs[i] = comm.MakeSlice(dt, sh[0]*sh[1]) // a fresh, zeroed buffer, as before
				continue
			}
			if id := h.Held[i]; id != 0 {
				// A copy this rank kept: read only, by any slot.
				hc, err := held.get(sctx, id)
				if err != nil {
					return fail(err)
				}
				datas[i], bufs[i], kept[i] = hc.data, hc.buf, hc.h
				if bufs[i].Type != dt || len(bufs[i].Bytes) != sh[0]*sh[1]*dt.Size() {
					return fail(fmt.Errorf("%w: buffer %d: the copy %d held here has %d bytes of %v, the task %d of %v", comm.ErrInvalidArg, i, id, len(bufs[i].Bytes), bufs[i].Type, sh[0]*sh[1]*dt.Size(), dt))
				}
				continue
			}
			if h.Keep[i] != 0 {
				datas[i], bufs[i] = comm.MakeSlice(dt, sh[0]*sh[1]) // kept: not the slot's to reuse
			} else {
				datas[i], bufs[i] = pool.take(dt, sh[0]*sh[1]) // packed: rows x cols; received whole
			}
			if _, err := c.Recv(sctx, bufs[i].Type, root, tag, func(int) ([]byte, error) { return bufs[i].Bytes, nil }); err != nil {
				return fail(err)
			}
			if id := h.Keep[i]; id != 0 {
				if err := held.fill(id, datas[i], bufs[i], sh); err != nil {
					return fail(err)
				}
				kept[i] = held.slot(id).h
			}
		}
		compute, finished, terr := run.task(ctx, ls, h, datas, kept)
		if finished {
			// No task and no handle of this rank holds them any more.
			for i, b := range bufs {
				if h.Same[i] == i && modes[i] != scheduler.ModeScratch && h.Held[i] == 0 && h.Keep[i] == 0 {
					pool.keep(datas[i], b)
				}
			}
		}
		pool.next()
		res := resultHeader{ComputeNs: int64(compute)}
		if terr != nil {
			res.Err = terr.Error()
		}
		if err := comm.SendValue(sctx, c, res, root, tag); err != nil {
			return fail(err)
		}
		if terr != nil {
			continue
		}
		for i, b := range bufs {
			if h.Same[i] == i && writes(modes[i]) {
				if err := c.Send(sctx, b, root, tag); err != nil {
					return fail(err)
				}
			}
		}
	}
}

// slotRunner runs a slot's tasks, one at a time, on the rank's scheduler.
// It runs each codelet through a wrapper that keeps the task's failure
// for the master instead of the rank's scheduler: a failure the worker
// rank only executed is not the rank's own (the scheduler's WaitAll and
// Close would return it).
type slotRunner struct {
	reg     *Registry
	wrapped map[string]*scheduler.Codelet
	// argTypes are the argument types of the tasks so far, by their
	// descriptions.
	argTypes map[string]reflect.Type
	err      error         // the running task's failure
	compute  time.Duration // the running task's codelet's time
	// done takes the running task's outcome from its OnDone callback
	// (onDone), which the slot waits for. Not Synchronous: its Submit
	// asks the scheduler whether the caller is a task's code, which reads
	// the goroutine's id from runtime.Stack, about 25 µs a task, 40 % of
	// a worker rank's time for 8 KiB tasks (BenchmarkMaster's profile).
	done   chan error
	onDone func(error)
}

func newSlotRunner(reg *Registry) *slotRunner {
	r := &slotRunner{reg: reg, wrapped: map[string]*scheduler.Codelet{}, argTypes: map[string]reflect.Type{}, done: make(chan error, 1)}
	r.onDone = func(err error) { r.done <- err }
	return r
}

// codelet returns the wrapper of the registered codelet named name.
func (r *slotRunner) codelet(name string) *scheduler.Codelet {
	if w := r.wrapped[name]; w != nil {
		return w
	}
	cl := r.reg.byName[name]
	if cl == nil {
		return nil
	}
	w := *cl
	w.CPU = func(c *scheduler.Call) (err error) {
		defer func() {
			if p := recover(); p != nil {
				r.err = fmt.Errorf("task %q panicked on worker %d: %v\n%s", name, c.Worker, p, debug.Stack())
			}
		}()
		t0 := time.Now()
		err = cl.CPU(c)
		r.compute = time.Since(t0)
		if err != nil {
			r.err = fmt.Errorf("task %q failed on worker %d: %w", name, c.Worker, err)
		}
		return nil
	}
	r.wrapped[name] = &w
	return &w
}

// task runs one received task on this rank's scheduler and returns the
// time its codelet ran and its failure. finished reports that the task
// ran to its end and its handles were unregistered: nothing of the
// scheduler's holds datas any more, and the slot may reuse them.
//
// kept are the handles of the rank's copies (heldData) that the task
// reads, nil for the other buffers: they stay registered.
func (r *slotRunner) task(ctx context.Context, ls *scheduler.Scheduler, h taskHeader, datas []any, kept []*scheduler.Handle) (_ time.Duration, finished bool, _ error) {
	cl := r.codelet(h.Codelet)
	if cl == nil { // the master checks this at Submit
		return 0, false, fmt.Errorf("%w: %q", ErrUnknownCodelet, h.Codelet)
	}
	hs := make([]*scheduler.Handle, len(datas))
	defer func() {
		for i, x := range hs {
			if x != nil && h.Same[i] == i && kept[i] == nil {
				if _, err := x.Unregister(ctx); err != nil {
					finished = false
				}
			}
		}
	}()
	args := []scheduler.Arg{scheduler.OnDone(r.onDone)}
	if h.ArgType != "" {
		arg, err := r.arg(h)
		if err != nil {
			return 0, false, err
		}
		args = append(args, scheduler.WithArg(arg))
	}
	for i, d := range datas {
		if f := h.Same[i]; f != i {
			hs[i] = hs[f] // one handle named twice: one buffer here too
		} else if kept[i] != nil {
			hs[i] = kept[i]
		} else {
			sh := h.Shapes[i]
			var err error
			if sh[1] == 1 && sh[2] == 1 {
				hs[i], err = ls.RegisterVector(d)
			} else {
				hs[i], err = ls.RegisterMatrix(d, sh[0], sh[1])
			}
			if err != nil {
				return 0, false, err
			}
		}
		mode := scheduler.Mode(h.Modes[i])
		switch mode {
		case scheduler.ModeR, scheduler.ModeScratch:
		default:
			mode = scheduler.ModeRW // W, Commute, Redux (the master's private copy): data in, data out
		}
		args = append(args, scheduler.Data(hs[i], mode))
	}
	r.err, r.compute = nil, 0
	if err := ls.Submit(ctx, cl, args...); err != nil {
		return 0, false, err // not submitted
	}
	select {
	case err := <-r.done:
		if err != nil && r.err == nil {
			return 0, true, err // the scheduler's, not the codelet's (which the wrapper keeps)
		}
		return r.compute, true, r.err
	case <-ctx.Done():
		// The task may still run: r's fields and datas are its, and the
		// slot ends (its receives run under a child of ctx).
		return 0, false, fmt.Errorf("waiting for task %q: %w", h.Codelet, context.Cause(ctx))
	}
}

// slotBufs keeps a slot's received buffers from one task to the next, so
// that a task of the same shapes as the one before it (the usual case:
// tiles of one size) receives into them instead of allocating and zeroing
// its buffers afresh, which cost a worker rank about as much as moving a
// large block (docs/performance.md, "Master/worker round trips"). It
// keeps only the last task's buffers: a slot holds no more memory
// between tasks than one task's data. A buffer is kept only once its
// task has ended and its handle is unregistered (slotRunner.task's
// finished). Each slot has its own; it is used by the slot's goroutine
// only.
type slotBufs struct {
	last, kept []pooled
}

// pooled is a kept buffer: the slice and its bytes.
type pooled struct {
	data any
	buf  comm.Buf
}

// take returns a buffer of n elements of dt, the last task's if it kept
// one of that size (its contents are the last task's: the caller
// receives into the whole of it), else a new one.
func (p *slotBufs) take(dt comm.Datatype, n int) (any, comm.Buf) {
	for i, b := range p.last {
		if b.buf.Type == dt && len(b.buf.Bytes) == n*dt.Size() {
			p.last = slices.Delete(p.last, i, i+1)
			return b.data, b.buf
		}
	}
	return comm.MakeSlice(dt, n)
}

// keep keeps data (its bytes b) for the next task.
func (p *slotBufs) keep(data any, b comm.Buf) {
	p.kept = append(p.kept, pooled{data, b})
}

// next ends a task: what it kept is offered to the next one, and what
// it did not reuse is dropped.
func (p *slotBufs) next() {
	clear(p.last)
	p.last, p.kept = p.kept, p.last[:0]
}

// packBuf returns a task buffer's elements as one contiguous Buf (a
// vector, or a rows x cols matrix with leading dimension ld) and the
// function that copies the Buf back into the buffer after a receive. The
// buffer must be a slice of a number type that the worker rank makes as is
// (comm.MakeSlice): []float64, []int32, ... but not []int or named types.
func packBuf(v any, rows, cols, ld int) (comm.Buf, func(), error) {
	b, ok := comm.BufOfSlice(v)
	if proto, _ := comm.MakeSlice(b.Type, 0); !ok || reflect.TypeOf(proto) != reflect.TypeOf(v) {
		return comm.Buf{}, nil, fmt.Errorf("%w: a %T cannot run on another rank: master/worker tasks take slices of int8-64, uint8-64, float32/64 or complex64/128", comm.ErrInvalidArg, v)
	}
	size := b.Type.Size()
	if cols == 1 && ld == 1 || ld == cols {
		b.Bytes = b.Bytes[:rows*cols*size]
		return b, func() {}, nil
	}
	p := comm.Buf{Bytes: make([]byte, rows*cols*size), Type: b.Type}
	row := cols * size
	for r := range rows {
		copy(p.Bytes[r*row:(r+1)*row], b.Bytes[r*ld*size:])
	}
	return p, func() {
		for r := range rows {
			copy(b.Bytes[r*ld*size:r*ld*size+row], p.Bytes[r*row:])
		}
	}, nil
}
