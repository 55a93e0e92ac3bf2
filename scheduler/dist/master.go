package dist

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"

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
	local   *scheduler.Scheduler
	c       comm.Comm
	reg     *Registry
	wrapped map[string]*scheduler.Codelet
	missing map[string][]int // codelet name -> ranks without it
	nlocal  int
	proxies []proxy // by worker id - nlocal
}

// proxy is a worker of the master that stands for one core of a rank.
type proxy struct {
	rank int
	tag  int // the slot's tag: its task and result messages
	mu   sync.Mutex
}

// taskHeader describes a task sent to a worker rank, or, with Stop, ends
// the slot.
type taskHeader struct {
	Stop    bool
	Codelet string
	Modes   []uint8
	Types   []uint8 // comm.Datatype of each buffer
	Shapes  [][3]int
	Arg     any
}

// resultHeader is a worker rank's answer.
type resultHeader struct {
	Err string
}

const slotTagBase = 1 << 20 // slot tags; below are free

// RunMaster runs fn on rank root with a Master whose workers are the cores
// of every rank of c; the other ranks serve the master's tasks until fn
// returns. It is collective: every rank calls it with its own registry
// (the codelets known by name on that rank) and local scheduler options
// (scheduler.WithWorkers sets how many cores a rank offers). A task whose
// codelet some rank lacks is refused at Submit, naming the ranks. Task
// arguments (scheduler.WithArg) travel through the codec and arrive as
// its generic values: use numbers, strings, slices and maps of them.
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
	ls, err := scheduler.New(ctx, opts...)
	if err != nil {
		return fmt.Errorf("dist: RunMaster: rank %d: %w", c.Rank(), err)
	}
	cores := len(ls.Workers())
	offers, err := comm.AllGatherValues(ctx, dc, offer{cores, reg.names()})
	if err != nil {
		_ = ls.Close()
		return fmt.Errorf("dist: RunMaster: %w", err)
	}
	if c.Rank() != root {
		serr := serve(ctx, dc, root, reg, ls, offers[c.Rank()].Cores, slotBase(offers, root, c.Rank()))
		return errors.Join(serr, ls.Close())
	}
	// The master's scheduler: its own cores, then the proxies.
	if err := ls.Close(); err != nil {
		return fmt.Errorf("dist: RunMaster: %w", err)
	}
	m := &Master{c: dc, reg: reg, nlocal: cores, wrapped: map[string]*scheduler.Codelet{}, missing: map[string][]int{}}
	for r, o := range offers {
		if r == root {
			continue
		}
		base := slotBase(offers, root, r)
		for s := range o.Cores {
			m.proxies = append(m.proxies, proxy{rank: r, tag: slotTagBase + base + s})
		}
		for _, name := range reg.names() {
			if _, ok := slices.BinarySearch(o.Names, name); !ok {
				m.missing[name] = append(m.missing[name], r)
			}
		}
	}
	total := append([]scheduler.Option{}, opts...)
	total = append(total, scheduler.WithWorkers(cores+len(m.proxies)))
	if m.local, err = scheduler.New(ctx, total...); err != nil {
		m.stop(ctx)
		return fmt.Errorf("dist: RunMaster: %w", err)
	}
	for name, cl := range reg.byName {
		m.wrapped[name] = m.wrap(cl)
	}
	ferr := fn(ctx, m)
	werr := m.local.WaitAll(ctx)
	cerr := m.local.Close()
	m.stop(ctx)
	if ferr != nil {
		return ferr
	}
	return errors.Join(werr, cerr)
}

// offer is what a rank brings to master/worker mode.
type offer struct {
	Cores int      // its workers
	Names []string // its codelets, sorted
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

// Submit submits a task of the registered codelet named cl.Name, which
// may run on any rank. Its data are handles of Local() holding slices of
// numbers (vectors or matrices). It is refused if a rank lacks the codelet.
func (m *Master) Submit(ctx context.Context, cl *scheduler.Codelet, args ...scheduler.Arg) error {
	w, ok := m.wrapped[cl.Name]
	if !ok {
		return fmt.Errorf("dist: submitting %q: %w: it is not in the master's registry", cl.Name, ErrUnknownCodelet)
	}
	if ranks := m.missing[cl.Name]; len(ranks) > 0 {
		return fmt.Errorf("dist: submitting %q: %w: ranks %v have no codelet of that name", cl.Name, ErrUnknownCodelet, ranks)
	}
	return m.local.Submit(ctx, w, args...)
}

// WaitAll waits for every task submitted so far.
func (m *Master) WaitAll(ctx context.Context) error { return m.local.WaitAll(ctx) }

// wrap makes cl's master-side codelet: on the master's own workers it runs
// cl, on a proxy it runs the task on the proxy's rank.
func (m *Master) wrap(cl *scheduler.Codelet) *scheduler.Codelet {
	w := *cl
	w.CPU = func(c *scheduler.Call) error {
		if c.Worker < m.nlocal {
			return cl.CPU(c)
		}
		return m.remote(c, cl.Name)
	}
	return &w
}

// remote runs the task of call c on the rank of its proxy worker.
func (m *Master) remote(c *scheduler.Call, name string) error {
	p := &m.proxies[c.Worker-m.nlocal]
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx := context.Background() // the slot's peer answers or the communicator breaks
	h := taskHeader{Codelet: name, Arg: c.Arg}
	bufs := make([]comm.Buf, c.Len())
	unpacks := make([]func(), c.Len())
	for i := range c.Len() {
		mode := c.Task.Access[i].Mode
		rows, cols, ld := c.Dims(i)
		b, unpack, err := packBuf(c.Data(i), rows, cols, ld)
		if err != nil {
			return fmt.Errorf("sending the task to rank %d: buffer %d: %w", p.rank, i, err)
		}
		bufs[i], unpacks[i] = b, unpack
		h.Modes = append(h.Modes, uint8(mode))
		h.Types = append(h.Types, uint8(b.Type))
		h.Shapes = append(h.Shapes, [3]int{rows, cols, ld})
	}
	if err := comm.SendValue(ctx, m.c, h, p.rank, p.tag); err != nil {
		return fmt.Errorf("sending the task to rank %d: %w", p.rank, err)
	}
	for i, b := range bufs {
		if scheduler.Mode(h.Modes[i]) == scheduler.ModeScratch {
			continue
		}
		if err := m.c.Send(ctx, b, p.rank, p.tag); err != nil {
			return fmt.Errorf("sending buffer %d to rank %d: %w", i, p.rank, err)
		}
	}
	res, _, err := comm.RecvValue[resultHeader](ctx, m.c, p.rank, p.tag)
	if err != nil {
		return fmt.Errorf("the result from rank %d: %w", p.rank, err)
	}
	if res.Err != "" {
		return fmt.Errorf("on rank %d: %s", p.rank, res.Err)
	}
	for i, b := range bufs {
		if !writes(scheduler.Mode(h.Modes[i])) {
			continue
		}
		if _, err := m.c.Recv(ctx, b.Type, p.rank, p.tag, func(n int) ([]byte, error) { return b.Bytes, nil }); err != nil {
			return fmt.Errorf("buffer %d from rank %d: %w", i, p.rank, err)
		}
		unpacks[i]()
	}
	return nil
}

// stop ends every slot of the worker ranks.
func (m *Master) stop(ctx context.Context) {
	for i := range m.proxies {
		p := &m.proxies[i]
		_ = comm.SendValue(ctx, m.c, taskHeader{Stop: true}, p.rank, p.tag)
	}
}

// writes reports whether a task's buffer in mode goes back to the master.
func writes(m scheduler.Mode) bool {
	return m&(scheduler.ModeW|scheduler.ModeRedux) != 0
}

// serve runs the master's tasks on this rank's slots until it stops them.
func serve(ctx context.Context, c comm.Comm, root int, reg *Registry, ls *scheduler.Scheduler, slots, base int) error {
	var wg sync.WaitGroup
	errs := make([]error, slots)
	for s := range slots {
		wg.Go(func() { errs[s] = serveSlot(ctx, c, root, reg, ls, slotTagBase+base+s) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func serveSlot(ctx context.Context, c comm.Comm, root int, reg *Registry, ls *scheduler.Scheduler, tag int) error {
	for {
		// Waiting for the master's next task is idle by design, however
		// long the master takes: no stall report, no timeout.
		h, _, err := comm.RecvValue[taskHeader](comm.Idle(ctx), c, root, tag)
		if err != nil {
			return fmt.Errorf("dist: serving the master: %w", err)
		}
		if h.Stop {
			return nil
		}
		bufs := make([]comm.Buf, len(h.Modes))
		datas := make([]any, len(h.Modes))
		for i := range h.Modes {
			sh := h.Shapes[i]
			datas[i], bufs[i] = comm.MakeSlice(comm.Datatype(h.Types[i]), sh[0]*sh[1]) // packed: rows x cols
			if scheduler.Mode(h.Modes[i]) == scheduler.ModeScratch {
				continue
			}
			if _, err := c.Recv(ctx, bufs[i].Type, root, tag, func(int) ([]byte, error) { return bufs[i].Bytes, nil }); err != nil {
				return fmt.Errorf("dist: serving the master: %w", err)
			}
		}
		terr := runTask(ctx, reg, ls, h, datas)
		res := resultHeader{}
		if terr != nil {
			res.Err = terr.Error()
		}
		if err := comm.SendValue(ctx, c, res, root, tag); err != nil {
			return fmt.Errorf("dist: serving the master: %w", err)
		}
		if terr != nil {
			continue
		}
		for i, b := range bufs {
			if writes(scheduler.Mode(h.Modes[i])) {
				if err := c.Send(ctx, b, root, tag); err != nil {
					return fmt.Errorf("dist: serving the master: %w", err)
				}
			}
		}
	}
}

// runTask runs one received task on this rank's scheduler.
func runTask(ctx context.Context, reg *Registry, ls *scheduler.Scheduler, h taskHeader, datas []any) error {
	cl := reg.byName[h.Codelet]
	if cl == nil { // the master checks this at Submit
		return fmt.Errorf("%w: %q", ErrUnknownCodelet, h.Codelet)
	}
	var hs []*scheduler.Handle
	defer func() {
		for _, x := range hs {
			_, _ = x.Unregister(ctx)
		}
	}()
	args := []scheduler.Arg{scheduler.Synchronous()}
	if h.Arg != nil {
		args = append(args, scheduler.WithArg(h.Arg))
	}
	for i, d := range datas {
		sh := h.Shapes[i]
		var x *scheduler.Handle
		var err error
		if sh[1] == 1 && sh[2] == 1 {
			x, err = ls.RegisterVector(d)
		} else {
			x, err = ls.RegisterMatrix(d, sh[0], sh[1])
		}
		if err != nil {
			return err
		}
		hs = append(hs, x)
		mode := scheduler.Mode(h.Modes[i])
		switch mode {
		case scheduler.ModeR, scheduler.ModeScratch:
		default:
			mode = scheduler.ModeRW // W, Commute, Redux (the master's private copy): data in, data out
		}
		args = append(args, scheduler.Data(x, mode))
	}
	return ls.Submit(ctx, cl, args...)
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
