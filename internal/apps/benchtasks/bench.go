package benchtasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pzgo/pz/internal/c2c"
	"github.com/pzgo/pz/scheduler"
)

// A Case is one kind of task graph.
type Case string

// The cases, after StarPU's tasks_overhead and tasks_size_overhead.
const (
	// CaseIndep is independent empty tasks without data, all submitted,
	// then waited for: the scheduler's bare per-task cost.
	CaseIndep Case = "indep"
	// CaseChain is tasks that each increment one counter through an RW
	// access to the same handle: implicit dependencies chain them.
	CaseChain Case = "chain"
	// CaseHandles4 is tasks that each increment four counters through RW
	// accesses to the same four handles: a chain with four handles' worth
	// of dependency bookkeeping per task.
	CaseHandles4 Case = "handles4"
	// CaseGrain is independent tasks that each spin for a fixed grain
	// (µs of calibrated CPU work); the figure is parallel efficiency.
	CaseGrain Case = "grain"
)

// Benchmark names of the Record.Bench field.
const (
	// BenchOverhead marks µs-per-task figures (indep, chain, handles4).
	BenchOverhead = "tasks_overhead"
	// BenchSize marks parallel-efficiency figures by task grain.
	BenchSize = "tasks_size_overhead"
)

// A Record is one figure, printed as one JSON object per line. The field
// names are a stable interface:
//
//	bench       "tasks_overhead" (value in us/task) or "tasks_size_overhead" (value: efficiency)
//	case        "indep", "chain", "handles4" or "grain"
//	grain_us    task duration of a grain case, in µs (absent otherwise)
//	policy      scheduling policy
//	workers     CPU workers of the scheduler
//	submitters  goroutines submitting the tasks concurrently (1 or 2)
//	submitters_work  true when the submitters are among the workers
//	            (Options.SubmittersWork; absent otherwise): workers counts
//	            them, as OpenMP's thread count counts the creating thread
//	batch       tasks per scheduler.Batch each submitter fills and
//	            flushes (Options.Batch; absent when tasks are submitted
//	            one by one)
//	tasks       tasks per timed round
//	value       our figure: median µs per task over the rounds (submission
//	            of all tasks to completion of the last, divided by the count),
//	            or efficiency = sequential time of the same work /
//	            (workers × wall time)
//	unit        "us/task" or "ratio"
//	peer        the peer figure's name (see PeerName), "" when none
//	peer_value  the peer's figure in the same unit (absent when none)
//	ratio       value / peer_value (absent when no peer): below 1 is
//	            better for us/task, above 1 is better for efficiency
//	openmp_peer   the OpenMP peer figure's name (see OpenMPName); absent
//	              when none (grain cases, no compiler, not measured)
//	openmp_value  the OpenMP peer's µs per task on as many threads as
//	              workers (absent when none)
//	openmp_ratio  value / openmp_value (absent when none): below 1 means
//	              pz is cheaper per task than OpenMP
//	openmp_paired_ratio  with the peer run round by round between pz's
//	              rounds (Options.PairedOpenMP; pzrun's default): the
//	              median over rounds of pz's round / the OpenMP round run
//	              beside it (absent otherwise). Each pair sees the same
//	              state of the machine, so on a machine whose speed changes
//	              between runs this is the figure to compare; openmp_value
//	              is then the median of the paired OpenMP rounds
//	c2c_ns      the machine's core-to-core round trip of a cache line
//	            (internal/c2c), sampled before each of pz's timed rounds:
//	            their median, in ns (absent on one core, or when the
//	            machine was too busy for every sample: c2c.ErrBusy). Each
//	            task costs a few such crossings, and on a virtual machine
//	            the figure changes several-fold within seconds
//
// The peer and ratio fields are StarPU's; the openmp_ fields were added
// later, beside them. StarPU and OpenMP submit from one thread; a figure
// with 2 submitters is compared with the same single-submitter peer
// figures (same task count, same graph).
type Record struct {
	Bench      string `json:"bench"`
	Case       Case   `json:"case"`
	GrainUS    int    `json:"grain_us,omitempty"`
	Policy     string `json:"policy"`
	Workers    int    `json:"workers"`
	Submitters int    `json:"submitters"`
	// SubmittersWork is submitters_work.
	SubmittersWork bool `json:"submitters_work,omitempty"`
	// Batch is batch.
	Batch       int      `json:"batch,omitempty"`
	Tasks       int      `json:"tasks"`
	Value       float64  `json:"value"`
	Unit        string   `json:"unit"`
	Peer        string   `json:"peer"`
	PeerValue   *float64 `json:"peer_value,omitempty"`
	Ratio       *float64 `json:"ratio,omitempty"`
	OpenMP      string   `json:"openmp_peer,omitempty"`
	OpenMPValue *float64 `json:"openmp_value,omitempty"`
	OpenMPRatio *float64 `json:"openmp_ratio,omitempty"`
	// OpenMPPaired is openmp_paired_ratio.
	OpenMPPaired *float64 `json:"openmp_paired_ratio,omitempty"`
	// C2CNs is c2c_ns.
	C2CNs *float64 `json:"c2c_ns,omitempty"`
}

// A PairedPeer runs one timed round of a peer for case c on workers
// threads with tasks tasks and returns its µs per task (see
// Options.PairedOpenMP; OpenMPPeer.Paired makes one).
type PairedPeer func(ctx context.Context, c Case, workers, tasks int) (float64, error)

// Options configure Run. The zero value of a field selects its default.
type Options struct {
	// Policies to measure; default all of scheduler.Policies().
	Policies []string
	// Workers lists the worker counts; default {one per core}. A count
	// of 1 gives the submitting goroutine a core of its own (StarPU's
	// ncpu1 figures).
	Workers []int
	// Submitters lists the numbers of submitting goroutines; default {1, 2}.
	Submitters []int
	// Cases to run; default indep, chain, handles4, grain.
	Cases []Case
	// Tasks per timed round of the overhead cases; default 100000 (as the
	// peer script).
	Tasks int
	// Rounds is the number of timed rounds, after one warm-up round of
	// Tasks/10; the median is reported. Default 7 (as the peer script).
	Rounds int
	// Grains are the task durations of the grain case in µs; default
	// 1, 16, 256 (a geometric series, as StarPU's -t 1 -T 256 -f 16).
	Grains []int
	// GrainTasks is the number of grain tasks per worker; default 5000
	// (StarPU's tasks_size_overhead -i).
	GrainTasks int
	// Peer supplies StarPU's figures (from ParsePeer or RunStarPU);
	// nil prints no peer values.
	Peer Peer
	// OpenMP supplies the OpenMP peer's figures, named by OpenMPName
	// (from RunOpenMP, or ParsePeer of such lines); nil prints none.
	OpenMP Peer
	// PairedOpenMP, when set, runs the OpenMP peer one round at a time
	// beside each timed round of the overhead cases, first before pz's
	// round, then after, alternately; its figures replace OpenMP's and
	// the records get openmp_paired_ratio (see Record).
	PairedOpenMP PairedPeer
	// RoundTrip samples the machine's core-to-core round trip before
	// each timed round of the overhead cases (c2c_ns); an error skips
	// the sample. Default: c2c.Sample.
	RoundTrip func() (time.Duration, error)
	// SubmittersWork, when set, makes each submitting goroutine one of
	// the workers (a scheduler.Driver that submits with Driver.Submit
	// and waits with Driver.WaitAll, running tasks meanwhile), as an
	// OpenMP thread that creates tasks is one of its team: the scheduler
	// starts workers − submitters goroutines of its own, and a case with
	// more submitters than workers is an error. Each submitter count then
	// gets a scheduler of its own.
	SubmittersWork bool
	// Batch, when positive, makes each submitter submit through a
	// scheduler.Batch that it flushes every Batch tasks (and at the end
	// of a round) instead of submitting each task on its own. Not with
	// SubmittersWork.
	Batch int
	// SchedulerOptions are passed to scheduler.New after the policy and
	// worker options.
	SchedulerOptions []scheduler.Option
}

func defaultWorkers() int { return min(runtime.NumCPU(), runtime.GOMAXPROCS(0)) }

func (o *Options) defaults() {
	if o.RoundTrip == nil {
		o.RoundTrip = c2c.Sample
	}
	if len(o.Policies) == 0 {
		o.Policies = scheduler.Policies()
	}
	if len(o.Workers) == 0 {
		o.Workers = []int{defaultWorkers()}
	}
	if len(o.Submitters) == 0 {
		o.Submitters = []int{1, 2}
	}
	if len(o.Cases) == 0 {
		o.Cases = []Case{CaseIndep, CaseChain, CaseHandles4, CaseGrain}
	}
	if o.Tasks == 0 {
		o.Tasks = 100000
	}
	if o.Rounds == 0 {
		o.Rounds = 7
	}
	if len(o.Grains) == 0 {
		o.Grains = []int{1, 16, 256}
	}
	if o.GrainTasks == 0 {
		o.GrainTasks = 5000
	}
}

// ErrBadOptions is returned by Run for invalid options.
var ErrBadOptions = errors.New("benchtasks: invalid options")

func (o *Options) validate() error {
	for _, w := range o.Workers {
		if w < 1 {
			return fmt.Errorf("%w: %d workers", ErrBadOptions, w)
		}
	}
	for _, s := range o.Submitters {
		if s < 1 {
			return fmt.Errorf("%w: %d submitters", ErrBadOptions, s)
		}
		for _, w := range o.Workers {
			if o.SubmittersWork && s > w {
				return fmt.Errorf("%w: %d submitters working among %d workers (each submitter is one of the workers)", ErrBadOptions, s, w)
			}
		}
	}
	if o.Batch < 0 {
		return fmt.Errorf("%w: batch of %d tasks", ErrBadOptions, o.Batch)
	}
	if o.Batch > 0 && o.SubmittersWork {
		return fmt.Errorf("%w: a batch with working submitters (a Driver submits one task at a time)", ErrBadOptions)
	}
	for _, g := range o.Grains {
		if g < 1 {
			return fmt.Errorf("%w: grain %d µs", ErrBadOptions, g)
		}
	}
	for _, c := range o.Cases {
		switch c {
		case CaseIndep, CaseChain, CaseHandles4, CaseGrain:
		default:
			return fmt.Errorf("%w: unknown case %q (valid: indep, chain, handles4, grain)", ErrBadOptions, c)
		}
	}
	if o.Tasks < 2 || o.Rounds < 1 || o.GrainTasks < 1 {
		return fmt.Errorf("%w: tasks %d, rounds %d and grain tasks %d must be positive (tasks ≥ 2)", ErrBadOptions, o.Tasks, o.Rounds, o.GrainTasks)
	}
	return nil
}

// Run measures every case for every policy, worker count and submitter
// count, and writes one JSON Record per line to out as soon as each is
// measured. It returns the records too. Each (policy, workers) pair gets
// its own scheduler, closed before the next.
func Run(ctx context.Context, opts Options, out io.Writer) ([]Record, error) {
	opts.defaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	enc := json.NewEncoder(out)
	var recs []Record
	emit := func(r Record) error {
		if pv, ok := opts.Peer[r.Peer]; ok && r.Peer != "" && pv.Value != 0 {
			v, ratio := pv.Value, r.Value/pv.Value
			r.PeerValue, r.Ratio = &v, &ratio
		} else {
			r.Peer = ""
		}
		if name := OpenMPName(r.Case, r.Workers); name != "" && r.Bench == BenchOverhead && r.OpenMPPaired == nil {
			if pv, ok := opts.OpenMP[name]; ok && pv.Value != 0 {
				v, ratio := pv.Value, r.Value/pv.Value
				r.OpenMP, r.OpenMPValue, r.OpenMPRatio = name, &v, &ratio
			}
		}
		recs = append(recs, r)
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("benchtasks: writing record: %w", err)
		}
		return nil
	}

	var seq map[[2]int]time.Duration // (grain, tasks) → sequential time of the tasks' spins
	var iterPerUS float64
	if slices.Contains(opts.Cases, CaseGrain) {
		iterPerUS = CalibrateSpin()
		seq = map[[2]int]time.Duration{}
	}
	for _, pol := range opts.Policies {
		for _, w := range opts.Workers {
			if !opts.SubmittersWork {
				if err := runOne(ctx, &opts, pol, w, opts.Submitters, iterPerUS, seq, emit); err != nil {
					return recs, err
				}
				continue
			}
			for _, sub := range opts.Submitters {
				if err := runOne(ctx, &opts, pol, w, []int{sub}, iterPerUS, seq, emit); err != nil {
					return recs, err
				}
			}
		}
	}
	return recs, nil
}

// runOne measures every case for the given submitter counts on one
// scheduler of policy pol with workers workers (with SubmittersWork,
// the submitters are its last workers: one submitter count per call).
func runOne(ctx context.Context, opts *Options, pol string, workers int, submitters []int, iterPerUS float64, seq map[[2]int]time.Duration, emit func(Record) error) (err error) {
	works := 0
	if opts.SubmittersWork {
		works = submitters[0]
	}
	b, err := newBench(ctx, pol, workers, works, opts.SchedulerOptions...)
	if err != nil {
		return err
	}
	b.batch = opts.Batch
	defer func() {
		if cerr := b.close(); cerr != nil && err == nil {
			err = fmt.Errorf("benchtasks: closing the scheduler: %w", cerr)
		}
	}()
	for _, c := range opts.Cases {
		for _, sub := range submitters {
			if c == CaseGrain {
				for _, g := range opts.Grains {
					iters := max(1, int(float64(g)*iterPerUS))
					n := opts.GrainTasks * workers
					key := [2]int{g, n}
					if _, ok := seq[key]; !ok {
						seq[key] = sequentialSpin(n, iters)
					}
					eff, err := grain(ctx, b, workers, sub, n, iters, seq[key])
					if err != nil {
						return fmt.Errorf("benchtasks: grain %d µs, policy %s: %w", g, pol, err)
					}
					if err := emit(Record{Bench: BenchSize, Case: c, GrainUS: g, Policy: pol, Workers: workers, Submitters: sub, SubmittersWork: opts.SubmittersWork, Batch: opts.Batch,
						Tasks: opts.GrainTasks * workers, Value: eff, Unit: "ratio", Peer: PeerName(c, pol, workers, g)}); err != nil {
						return err
					}
				}
				continue
			}
			var pair PairedPeer
			if OpenMPName(c, workers) != "" {
				pair = opts.PairedOpenMP
			}
			m, err := overhead(ctx, b, c, sub, opts.Tasks, opts.Rounds, pair, workers, opts.RoundTrip)
			if err != nil {
				return fmt.Errorf("benchtasks: case %s, policy %s, %d submitters: %w", c, pol, sub, err)
			}
			r := Record{Bench: BenchOverhead, Case: c, Policy: pol, Workers: workers, Submitters: sub, SubmittersWork: opts.SubmittersWork, Batch: opts.Batch,
				Tasks: opts.Tasks, Value: m.pz, Unit: "us/task", Peer: PeerName(c, pol, workers, 0)}
			if pair != nil {
				v, ratio, paired := m.peer, m.pz/m.peer, m.ratio
				r.OpenMP, r.OpenMPValue, r.OpenMPRatio, r.OpenMPPaired = OpenMPName(c, workers), &v, &ratio, &paired
			}
			if m.c2c > 0 {
				c2c := m.c2c
				r.C2CNs = &c2c
			}
			if err := emit(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// medians are overhead's figures: pz's median µs per task, the median
// core-to-core round trip in ns (0 on one core) and, with a paired peer,
// the peer's median and the median of the rounds' ratios.
type medians struct{ pz, c2c, peer, ratio float64 }

// overhead returns the median µs per task of rounds rounds of n tasks of
// case c, after a warm-up round of n/10, checking that every task ran
// exactly once. With pair, a round of the peer on workers threads runs
// beside each timed round: before it in even rounds, after it in odd
// ones, so that neither side always follows the other. With roundTrip,
// a core-to-core sample is taken before each timed round.
func overhead(ctx context.Context, b *bench, c Case, submitters, n, rounds int, pair PairedPeer, workers int, roundTrip func() (time.Duration, error)) (medians, error) {
	s := b.s
	nh := 0
	switch c {
	case CaseChain:
		nh = 1
	case CaseHandles4:
		nh = 4
	}
	counters := make([][]uint64, nh)
	handles := make([]*scheduler.Handle, nh)
	for i := range counters {
		counters[i] = make([]uint64, 1)
		h, err := s.RegisterVector(counters[i], scheduler.Named(fmt.Sprintf("counter%d", i)))
		if err != nil {
			return medians{}, err
		}
		handles[i] = h
	}
	var ran atomic.Int64
	cl := &scheduler.Codelet{Name: "empty", CPU: func(*scheduler.Call) error { ran.Add(1); return nil }}
	var args []scheduler.Arg
	if nh > 0 {
		cl = &scheduler.Codelet{Name: fmt.Sprintf("incr%d", nh), CPU: func(call *scheduler.Call) error {
			for i := range call.Len() {
				scheduler.VectorOf[uint64](call, i)[0]++
			}
			return nil
		}}
		for _, h := range handles {
			args = append(args, scheduler.RW(h))
		}
	}
	total := 0
	times := make([]float64, 0, rounds)
	var peer, ratios, trips []float64
	runPeer := func() error {
		v, err := pair(ctx, c, workers, n)
		if err != nil {
			return fmt.Errorf("paired peer round: %w", err)
		}
		peer = append(peer, v)
		return nil
	}
	for r := -1; r < rounds; r++ {
		m := n
		if r < 0 {
			m = max(1, n/10)
		}
		if pair != nil && r >= 0 && r%2 == 0 {
			if err := runPeer(); err != nil {
				return medians{}, err
			}
		}
		if r >= 0 && roundTrip != nil {
			// The workers are idle between rounds (all tasks done): the
			// sample has the cores to itself.
			if d, err := roundTrip(); err == nil {
				trips = append(trips, float64(d.Nanoseconds()))
			}
		}
		d, err := b.submitAll(ctx, cl, args, submitters, m)
		if err != nil {
			return medians{}, err
		}
		total += m
		if r < 0 {
			continue
		}
		times = append(times, float64(d)/float64(time.Microsecond)/float64(m))
		if pair != nil && r%2 == 1 {
			if err := runPeer(); err != nil {
				return medians{}, err
			}
		}
		if pair != nil {
			ratios = append(ratios, times[r]/peer[r])
		}
	}
	var errs []error
	for i, h := range handles {
		if _, err := h.Unregister(ctx); err != nil {
			errs = append(errs, err)
		}
		if counters[i][0] != uint64(total) {
			errs = append(errs, fmt.Errorf("counter %d is %d after %d tasks: a task was lost or ran twice", i, counters[i][0], total))
		}
	}
	if nh == 0 && ran.Load() != int64(total) {
		errs = append(errs, fmt.Errorf("%d of %d tasks ran", ran.Load(), total))
	}
	if err := errors.Join(errs...); err != nil {
		return medians{}, err
	}
	out := medians{pz: median(times)}
	if len(trips) > 0 {
		out.c2c = median(trips)
	}
	if pair != nil {
		out.peer, out.ratio = median(peer), median(ratios)
	}
	return out, nil
}

// median returns the median of xs (the upper one of an even count), which
// it sorts.
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// A bench is the scheduler under measurement and, with
// Options.SubmittersWork, the drivers of the workers its submitters are.
type bench struct {
	s       *scheduler.Scheduler
	drivers []*scheduler.Driver
	batch   int // Options.Batch
}

// newBench makes a scheduler of policy pol with workers workers, the
// last works of them driven by submitters (Options.SubmittersWork).
func newBench(ctx context.Context, pol string, workers, works int, extra ...scheduler.Option) (*bench, error) {
	opts := []scheduler.Option{scheduler.WithPolicy(pol), scheduler.WithWorkers(workers)}
	if works > 0 {
		opts = append(opts, scheduler.WithDrivenWorkers(works))
	}
	s, err := scheduler.New(ctx, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("benchtasks: policy %s, %d workers: %w", pol, workers, err)
	}
	b := &bench{s: s}
	for id := workers - works; id < workers; id++ {
		d, err := s.Driver(id)
		if err == nil {
			// The CPU driver binds nothing to the calling goroutine:
			// each round's submitter goroutines may drive it.
			err = d.Init()
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("benchtasks: policy %s: %w", pol, err), b.close())
		}
		b.drivers = append(b.drivers, d)
	}
	return b, nil
}

// close deinitializes the drivers and closes the scheduler.
func (b *bench) close() error {
	var errs []error
	for _, d := range b.drivers {
		errs = append(errs, d.Deinit())
	}
	return errors.Join(append(errs, b.s.Close())...)
}

// submitAll submits n tasks of cl from submitters goroutines (splitting n
// evenly) and waits for all of them; it returns the time from the first
// submission to the end of WaitAll. With drivers, submitter k submits
// and waits through driver k, running tasks as it goes.
func (b *bench) submitAll(ctx context.Context, cl *scheduler.Codelet, args []scheduler.Arg, submitters, n int) (time.Duration, error) {
	s := b.s
	t0 := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for k := range submitters {
		share := n/submitters + btoi(k < n%submitters)
		submit, wait := s.Submit, func(context.Context) error { return nil }
		if b.drivers != nil {
			submit, wait = b.drivers[k].Submit, b.drivers[k].WaitAll
		}
		g.Go(func() error {
			if b.batch > 0 {
				return submitBatched(gctx, s.NewBatch(), b.batch, cl, args, share)
			}
			for range share {
				if err := submit(gctx, cl, args...); err != nil {
					return err
				}
			}
			return wait(gctx)
		})
	}
	err := g.Wait()
	if werr := s.WaitAll(ctx); err == nil {
		err = werr
	}
	return time.Since(t0), err
}

// submitBatched submits n tasks of cl through bt, flushing it every
// size tasks and at the end.
func submitBatched(ctx context.Context, bt *scheduler.Batch, size int, cl *scheduler.Codelet, args []scheduler.Arg, n int) error {
	for i := range n {
		if err := bt.Submit(ctx, cl, args...); err != nil {
			bt.Flush()
			return err
		}
		if (i+1)%size == 0 {
			bt.Flush()
		}
	}
	bt.Flush()
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sequentialSpin returns the time of n spins of iters iterations run
// one after the other on the calling goroutine: the sequential time of
// the grain case's work.
func sequentialSpin(n, iters int) time.Duration {
	var x uint64 = 1
	t0 := time.Now()
	for range n {
		x = Spin(iters, x)
	}
	d := time.Since(t0)
	if x == 0 { // never (see Spin); keeps the loop live
		d++
	}
	return d
}

// grain returns the parallel efficiency of n independent spin tasks of
// iters iterations: seq / (workers × wall).
func grain(ctx context.Context, b *bench, workers, submitters, n, iters int, seq time.Duration) (float64, error) {
	var sink atomic.Uint64
	cl := &scheduler.Codelet{Name: "spin", CPU: func(c *scheduler.Call) error {
		sink.Add(Spin(iters, uint64(c.Worker)+1))
		return nil
	}}
	wall, err := b.submitAll(ctx, cl, nil, submitters, n)
	if err != nil {
		return 0, err
	}
	return seq.Seconds() / (float64(workers) * wall.Seconds()), nil
}
