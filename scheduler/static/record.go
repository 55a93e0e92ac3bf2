package static

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime/metrics"
)

// A Run is what one run of a plan recorded: every runnable's planned and
// actual start and end in every frame, and the garbage collector's work.
// It is the run JSON that `pzrun stm analyze` reads (RunVersion; the
// fields are documented in docs/static-schedules.md and kept stable).
type Run struct {
	Format  string `json:"format"` // "pz-stm-run"
	Version int    `json:"version"`
	Plan    string `json:"plan"`
	Source  string `json:"source"`
	// Periods is how many periods were started: the most of any
	// hyperepoch. A frame limit runs as many periods of every hyperepoch,
	// but when a stop ends the run, a hyperepoch of 10 ms has started
	// about two periods to one of 20 ms; Hyperepochs gives each one's.
	Periods int `json:"periods"`
	// Stopped says why the run ended.
	Stopped     string          `json:"stopped"`
	Runnables   []RunnableRun   `json:"runnables"`
	Clients     []ClientRun     `json:"clients"`
	Hyperepochs []RunHyperepoch `json:"hyperepochs"`
}

// RunVersion is the version of the run format this package writes.
const RunVersion = 1

// A RunHyperepoch gives a hyperepoch's period, to lay out the timeline,
// and how many of its periods were started.
type RunHyperepoch struct {
	Name   string `json:"name"`
	Period int64  `json:"period_ns"`
	// Periods is how many periods of this hyperepoch were started (a
	// frame of one of its runnables recorded); 0 in records written
	// before it was added.
	Periods int `json:"periods"`
}

// Flags of a RunnableRun's frame.
const (
	FlagSkipped         = 1 << iota // not run (frameskip)
	FlagOverrunWCET                 // ran longer than its WCET
	FlagOverrunDeadline             // ended after its deadline
	FlagTimeout                     // ran past its timeout
	FlagError                       // returned an error or panicked
)

// A RunnableRun is one runnable's record, a column per quantity and a
// row per frame it reached. Times are ns from the run's start (t0).
type RunnableRun struct {
	Name     string `json:"name"`
	Client   string `json:"client"`
	Resource string `json:"resource"`
	WCET     int64  `json:"wcet_ns"`
	// Deps and Submitter are the runnable's predecessors in the plan, in
	// the same frame: the analysis names the one whose late end delayed
	// a start. Records written before they were added lack them.
	Deps      []string `json:"deps,omitempty"`
	Submitter string   `json:"submitter,omitempty"`
	// Seq is the frame number of each row; Planned its planned start.
	Seq     []int64 `json:"seq"`
	Planned []int64 `json:"planned_ns"`
	// Deadline is each row's latest end that delays nothing.
	Deadline []int64 `json:"deadline_ns"`
	Start    []int64 `json:"start_ns"`
	End      []int64 `json:"end_ns"`
	Flags    []int   `json:"flags"`
	// AllocObjects and AllocBytes are the heap allocations the client's
	// process published while it ran: other runnables of the process
	// running at the same time are counted too, and the runtime publishes
	// small allocations in batches (when a span is refilled, itself during
	// an allocation), so a run that allocates is seen but its counts are
	// lower bounds.
	AllocObjects []uint64 `json:"alloc_objects"`
	AllocBytes   []uint64 `json:"alloc_bytes"`
	// Errors holds the first few errors it returned, each as "frame
	// SEQ: MESSAGE".
	Errors []string `json:"errors,omitempty"`
	// Dropped counts rows not kept (the recorder keeps the last ones).
	Dropped int64 `json:"dropped,omitempty"`
	// Abandoned counts the frames after the last row that its client
	// gave up, none of them run, when a stop came while it lagged far
	// behind the plan (see the package doc, Stopping): the frames the
	// stop would have run are the rows' and these.
	Abandoned int64 `json:"abandoned,omitempty"`
	// Lost marks a runnable whose client's records never reached the
	// master (its process died or stopped answering): its columns are
	// empty, not a runnable that reached no frame.
	Lost bool `json:"lost,omitempty"`
}

// A ClientRun is one client's record.
type ClientRun struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// GC lists the periods in which the client's process collected
	// garbage.
	GC []GCPeriod `json:"gc,omitempty"`
	// Allocs lists the periods in which the client's process allocated
	// (read once per period, at its first resource's last run).
	Allocs []AllocPeriod `json:"allocs,omitempty"`
	// PeriodsOf names the hyperepoch whose periods GC and Allocs count
	// (its first CPU resource's); empty in records written before it
	// was added.
	PeriodsOf string `json:"periods_of,omitempty"`
	// PerRun says whether allocations were also counted around every run
	// (WithAllocationCounts): then RunnableRun's AllocObjects and
	// AllocBytes name the runnables; otherwise they are zero.
	PerRun bool `json:"alloc_per_run,omitempty"`
	// Lost says that the client's records never reached the master (its
	// process died or stopped answering): its runnables are marked Lost,
	// and it has no GC or allocation records.
	Lost bool `json:"lost,omitempty"`
}

// An AllocPeriod is what a client's process allocated during one period.
type AllocPeriod struct {
	Period  int64  `json:"period"`
	Objects uint64 `json:"objects"`
	Bytes   uint64 `json:"bytes"`
	// NewThreads counts the OS threads the Go runtime started in the
	// period: each allocates a few objects of the runtime's own.
	NewThreads uint64 `json:"new_threads,omitempty"`
	// ExitedThreads counts the OS threads that ended in the period (as
	// the live count fell): a thread locked to a goroutine that returned,
	// such as a resource thread of an earlier run in the same process.
	// Its processor goes to another thread, which the runtime may start
	// then, so a start and an exit can cancel out in the live count.
	ExitedThreads uint64 `json:"exited_threads,omitempty"`
}

// RuntimeObjects reports whether a period's allocations can be the
// runtime's own: no more than threadObjects per OS thread started or
// ended in it or in the periods around it (the runtime publishes small
// allocations in batches, so a thread and its objects can fall periods
// apart); around is the threads started or ended around it, as the
// process's clients saw them (Analyze pools the clients of a process,
// which read the same counters at different moments).
func (p AllocPeriod) RuntimeObjects(around uint64) bool {
	return p.Objects <= threadObjects*(p.NewThreads+p.ExitedThreads+around)
}

// threadWindow is how many periods before and after a period
// RuntimeObjects' around takes in: under load the runtime's objects for a
// thread have been published two periods after it was counted.
const threadWindow = 2

// threadObjects bounds the heap objects the runtime allocates to start
// an OS thread (its m, its signal goroutine and their bookkeeping: 5 seen
// with Go 1.26).
const threadObjects = 8

// A GCPeriod is the garbage collector's work during one period.
type GCPeriod struct {
	Period int64 `json:"period"`
	Cycles int64 `json:"cycles"`
	// PauseNs estimates the stop-the-world time (from the runtime's
	// pause histogram, each pause at its bucket's upper bound).
	PauseNs int64 `json:"pause_ns"`
}

// WriteRun writes r as JSON.
func WriteRun(w io.Writer, r *Run) error {
	return json.NewEncoder(w).Encode(r)
}

// ReadRun reads a run written by WriteRun.
func ReadRun(rd io.Reader) (*Run, error) {
	src, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("static: reading a run: %w", err)
	}
	// The format first: a plan, say, fails the run's fields otherwise.
	var head struct {
		Format      string          `json:"format"`
		Version     *int            `json:"version"`
		TraceEvents json.RawMessage `json:"traceEvents"`
	}
	headOK := json.Unmarshal(src, &head) == nil
	switch {
	case headOK && head.Format == "pz-stm":
		return nil, fmt.Errorf("static: this is a compiled plan (format pz-stm), not a run record: analyze what -o of pzrun stm run or stm master writes (static.WriteRun)")
	case headOK && head.Format == "" && head.TraceEvents != nil:
		return nil, fmt.Errorf("static: this is a trace (Trace Event Format, what pzrun stm analyze -trace writes, for Perfetto), not a run record: analyze what -o of pzrun stm run or stm master writes (static.WriteRun)")
	case headOK && head.Format == "":
		return nil, fmt.Errorf("static: this JSON is not a run record (it has no \"format\": \"pz-stm-run\"): analyze what -o of pzrun stm run or stm master writes (static.WriteRun)")
	case headOK && head.Format == "pz-stm-run" && head.Version != nil && *head.Version != RunVersion:
		return nil, fmt.Errorf("static: this run record is of version %d, and this pz reads version %d: analyze it with the pz (pzrun) that wrote it, or run the schedule again", *head.Version, RunVersion)
	}
	var r Run
	if err := json.Unmarshal(src, &r); err != nil {
		if t := bytes.TrimSpace(src); len(t) > 0 && t[0] != '{' && t[0] != '[' {
			if _, perr := Parse(src, ""); perr == nil || bytes.Contains(src, []byte("hyperepochs:")) {
				return nil, fmt.Errorf("static: this is a schedule (YAML), not a run record: run it first (pzrun stm run SCHEDULE.yaml -o RUN.json, or pzrun stm master with -o), then analyze the RUN.json it writes")
			}
			return nil, fmt.Errorf("static: this is not a run record, which is JSON (what -o of pzrun stm run or stm master writes): %w", err)
		}
		return nil, fmt.Errorf("static: reading a run: %w", err)
	}
	if r.Format != "pz-stm-run" || r.Version != RunVersion {
		return nil, fmt.Errorf("static: not a run record (format %q version %d, want pz-stm-run %d)", r.Format, r.Version, RunVersion)
	}
	for _, rr := range r.Runnables {
		if err := rr.checkColumns(); err != nil {
			return nil, fmt.Errorf("static: run record: %w", err)
		}
	}
	return &r, nil
}

// checkColumns reports columns of different lengths.
func (rr *RunnableRun) checkColumns() error {
	n := len(rr.Seq)
	if len(rr.Planned) != n || len(rr.Deadline) != n || len(rr.Start) != n || len(rr.End) != n ||
		len(rr.Flags) != n || len(rr.AllocObjects) != n || len(rr.AllocBytes) != n {
		return fmt.Errorf("runnable %q has columns of different lengths", rr.Name)
	}
	return nil
}

// recorder keeps a runnable's rows in preallocated columns: the last
// len(cols) rows, so that recording never allocates inside the loop.
type recorder struct {
	rr        RunnableRun
	n         int64 // rows written
	errs      int
	abandoned int64 // frames given up after a stop (executor.abandon)
}

// maxRows bounds the rows kept per runnable: about two minutes at 1 kHz.
const maxRows = 1 << 17

func newRecorder(r PlanRunnable, rows int) *recorder {
	rows = max(1, min(rows, maxRows))
	rec := &recorder{rr: RunnableRun{
		Name: r.Name, Client: r.Client, Resource: r.Resource, WCET: int64(r.WCET),
		Deps: r.Deps, Submitter: r.Submitter,
		Seq: make([]int64, rows), Planned: make([]int64, rows), Deadline: make([]int64, rows),
		Start: make([]int64, rows), End: make([]int64, rows), Flags: make([]int, rows),
		AllocObjects: make([]uint64, rows), AllocBytes: make([]uint64, rows),
	}}
	rr := &rec.rr
	prefault(rr.Seq, rr.Planned, rr.Deadline, rr.Start, rr.End)
	prefault(rr.Flags)
	prefault(rr.AllocObjects, rr.AllocBytes)
	return rec
}

// prefault writes every page of the columns before the loop. Large
// allocations come from the OS untouched; the first write to each page
// then faults, and with a row per frame every column crosses into a new
// 4 KiB page every 512 frames, all at once: a stall of every runnable in
// that frame.
func prefault[T any](cols ...[]T) {
	for _, c := range cols {
		clear(c) // a write: it touches every page
	}
}

// reserve returns an empty slice with room for n, its memory written
// through (prefault), for appending in the loop.
func reserve[T any](n int) []T {
	s := make([]T, n)
	prefault(s)
	return s[:0]
}

func (r *recorder) add(seq, planned, deadline, start, end int64, flags int, objs, bytes uint64) {
	i := r.n % int64(len(r.rr.Seq))
	r.rr.Seq[i], r.rr.Planned[i], r.rr.Deadline[i], r.rr.Start[i], r.rr.End[i], r.rr.Flags[i] = seq, planned, deadline, start, end, flags
	r.rr.AllocObjects[i], r.rr.AllocBytes[i] = objs, bytes
	r.n++
}

// addError keeps the first few error messages with their frames.
func (r *recorder) addError(seq int64, err error) {
	r.errs++
	if len(r.rr.Errors) < 5 {
		r.rr.Errors = append(r.rr.Errors, fmt.Sprintf("frame %d: %v", seq, err))
	}
}

// result returns the rows in order.
func (r *recorder) result() RunnableRun {
	out := r.rr
	out.Abandoned = r.abandoned
	k := int64(len(out.Seq))
	if r.n <= k {
		n := int(r.n)
		out.Seq, out.Planned, out.Deadline, out.Start, out.End, out.Flags = out.Seq[:n], out.Planned[:n], out.Deadline[:n], out.Start[:n], out.End[:n], out.Flags[:n]
		out.AllocObjects, out.AllocBytes = out.AllocObjects[:n], out.AllocBytes[:n]
		return out
	}
	cut := int(r.n % k)
	rot := func(s []int64) []int64 { return append(append([]int64{}, s[cut:]...), s[:cut]...) }
	rotu := func(s []uint64) []uint64 { return append(append([]uint64{}, s[cut:]...), s[:cut]...) }
	out.Seq, out.Planned, out.Deadline, out.Start, out.End = rot(out.Seq), rot(out.Planned), rot(out.Deadline), rot(out.Start), rot(out.End)
	out.Flags = append(append([]int{}, out.Flags[cut:]...), out.Flags[:cut]...)
	out.AllocObjects, out.AllocBytes = rotu(out.AllocObjects), rotu(out.AllocBytes)
	out.Dropped = r.n - k
	return out
}

// allocMeter reads the process's heap allocation counters without
// stopping the world (runtime/metrics) and without allocating.
type allocMeter struct {
	s [2]metrics.Sample
	t [1]metrics.Sample
}

func newAllocMeter() *allocMeter {
	m := &allocMeter{}
	m.s[0].Name = "/gc/heap/allocs:objects"
	m.s[1].Name = "/gc/heap/allocs:bytes"
	m.t[0].Name = "/sched/threads/total:threads"
	return m
}

func (m *allocMeter) read() (objs, bytes uint64) {
	metrics.Read(m.s[:])
	return m.s[0].Value.Uint64(), m.s[1].Value.Uint64()
}

// threads returns the OS threads the runtime has (0 if it does not say).
func (m *allocMeter) threads() uint64 {
	metrics.Read(m.t[:])
	if m.t[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return m.t[0].Value.Uint64()
}

// gcMeter reads the collector's cycle count and pause histogram.
type gcMeter struct {
	s      [2]metrics.Sample
	cycles uint64
	counts []uint64
}

func newGCMeter() *gcMeter {
	g := &gcMeter{}
	g.s[0].Name = "/gc/cycles/total:gc-cycles"
	g.s[1].Name = "/sched/pauses/total/gc:seconds"
	g.delta()
	return g
}

// delta returns the cycles and the estimated pause time since the last call.
func (g *gcMeter) delta() (cycles int64, pause int64) {
	metrics.Read(g.s[:])
	c := g.s[0].Value.Uint64()
	cycles = int64(c - g.cycles)
	g.cycles = c
	if g.s[1].Value.Kind() != metrics.KindFloat64Histogram {
		return cycles, 0
	}
	h := g.s[1].Value.Float64Histogram()
	if g.counts == nil {
		g.counts = make([]uint64, len(h.Counts))
	}
	var sec float64
	for i, n := range h.Counts {
		if i >= len(g.counts) {
			break
		}
		if d := n - g.counts[i]; d > 0 {
			hi := h.Buckets[i+1]
			if math.IsInf(hi, 1) {
				hi = h.Buckets[i]
			}
			sec += float64(d) * hi
		}
		g.counts[i] = n
	}
	return cycles, int64(sec * 1e9)
}
