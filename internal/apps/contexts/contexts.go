package contexts

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"

	"github.com/pzgo/pz/internal/apps/cholesky"
	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/internal/linalg"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/hypervisor"
)

// Options configure Run. The zero value of each field selects its
// default.
type Options struct {
	// Small and Large are the orders of the two matrices (default 1024
	// and 2048: the large one is 8 times the work). Each must be a
	// multiple of Block, and Small at most Large.
	Small, Large int
	// Block is the tile size (default 128).
	Block int
	// Precision is 32 (default) or 64.
	Precision int
	// Workers is the number of CPU workers of each run (default: the
	// scheduler's, PZ_NCPU or one per allowed core); at least 2.
	Workers int
	// Policy is the policy inside each context ("" : the scheduler's
	// default).
	Policy string
	// Hypervisor is the hypervisor policy of the third run (default
	// gflops_rate; see hypervisor.Policies), or a comma-separated list
	// of policies, each run in turn after the static split
	// ("idle,feft,teft"). Under teft the app announces each context's
	// tasks (hypervisor.AnnounceTasks) before submitting them. Under
	// app_driven it asks (AppDriven.OnTag) to move all the small
	// context's workers to the large one when the small factorization
	// ends, marked by a tagged no-op task in the small context, and the
	// run ends once they moved, even when the large factorization ended
	// first (after the makespan is measured).
	Hypervisor string
	// Check computes each factorization's residual ‖A − L·Lᵀ‖/‖A‖.
	Check bool
	// Trace, when set, is where the (last) hypervisor run's Chrome trace
	// JSON is written, with its Gantt chart SVG beside it (.svg).
	Trace string
	// JSON makes Run print JSON lines instead of a table.
	JSON bool
	// Repeat runs the modes this many times, interleaved (global,
	// static, hypervisor, global, ...), and reports for each mode the run
	// with the median makespan (default 1): on a shared machine the
	// median resists other processes' load.
	Repeat int
	// Seed selects the random SPD matrices (default 1).
	Seed uint64
	// Logger receives the scheduler's and the hypervisor's logs
	// (default: none); the hypervisor's resizes and refused moves (Info)
	// only with LogResizes, its warnings always. Either way each mode's
	// resizes are counted in its result (Resizes).
	Logger *zap.Logger
	// LogResizes logs every resize (pzrun contexts -v).
	LogResizes bool
}

// doneTag tags the no-op task that marks the end of the small
// factorization under app_driven (any tag the factorization does not
// use: it tags none).
const doneTag scheduler.Tag = 1 << 62

// A ModeResult is one of the runs. Its JSON form is one line of
// `pzrun contexts --json`; field names are a stable interface:
//
//	app          "contexts"
//	mode         "global" (one context, all workers), "static" (two
//	             contexts with half the workers each) or "hypervisor"
//	             (the same two contexts, resized by the hypervisor; one
//	             line per policy)
//	n_small, n_large, block, precision, workers, policy
//	hypervisor   the hypervisor policy ("" except in mode hypervisor)
//	makespan_s   wall time from the first submission of either
//	             factorization to the end of both
//	small_s, large_s  each factorization's time from its first
//	             submission until its WaitAll returned (in mode global
//	             that WaitAll waits for every task then in flight, the
//	             other factorization's too)
//	gflops       (n_small³ + n_large³)/3 / makespan_s / 10⁹
//	resizes      workers moved by the hypervisor
//	runs         how many times the mode ran (Options.Repeat); the
//	             figures are those of the run with the median makespan
//	checked      whether the residuals were computed (-check)
//	residual_small, residual_large  ‖A − L·Lᵀ‖_F/‖A‖_F (0 unless checked)
type ModeResult struct {
	App           string  `json:"app"`
	Mode          string  `json:"mode"`
	Small         int     `json:"n_small"`
	Large         int     `json:"n_large"`
	Block         int     `json:"block"`
	Precision     int     `json:"precision"`
	Workers       int     `json:"workers"`
	Policy        string  `json:"policy"`
	Hypervisor    string  `json:"hypervisor"`
	Makespan      float64 `json:"makespan_s"`
	SmallSeconds  float64 `json:"small_s"`
	LargeSeconds  float64 `json:"large_s"`
	GFlops        float64 `json:"gflops"`
	Resizes       int     `json:"resizes"`
	Runs          int     `json:"runs"`
	Checked       bool    `json:"checked"`
	ResidualSmall float64 `json:"residual_small"`
	ResidualLarge float64 `json:"residual_large"`
}

// A Result is the runs and the hypervisor's gain. Its JSON form (mode
// "summary") adds to the common fields:
//
//	global_s, static_s, hypervisor_s   the makespans (hypervisor_s: the
//	                 first policy's)
//	gain_vs_static   static_s / hypervisor_s (above 1: the hypervisor is faster)
//	gain_vs_global   global_s / hypervisor_s
//	hypervisors      one object per hypervisor policy run: policy,
//	                 makespan_s, gain_vs_static, gain_vs_global and
//	                 gain_vs_idle (idle's makespan over this one's; 0
//	                 when idle was not run)
type Result struct {
	// Hypervisor is the first hypervisor policy's run, Hypervisors all
	// of them in the order of Options.Hypervisor.
	Global, Static, Hypervisor ModeResult
	Hypervisors                []ModeResult
	// GainVsStatic and GainVsGlobal are the first policy's; Gains each
	// policy's.
	GainVsStatic, GainVsGlobal float64
	Gains                      []Gain
	// Checked says the residuals were computed (Options.Check): the
	// table shows them.
	Checked bool
}

// A Gain compares one hypervisor policy's makespan with the others.
type Gain struct {
	// Policy is the hypervisor policy; Makespan its run's makespan (s).
	Policy   string  `json:"policy"`
	Makespan float64 `json:"makespan_s"`
	// VsStatic, VsGlobal and VsIdle are the static split's, the global
	// context's and idle's makespans over this one's (above 1: this
	// policy is faster; VsIdle is 0 when idle did not run).
	VsStatic float64 `json:"gain_vs_static"`
	VsGlobal float64 `json:"gain_vs_global"`
	VsIdle   float64 `json:"gain_vs_idle"`
}

type summary struct {
	App          string  `json:"app"`
	Mode         string  `json:"mode"`
	Small        int     `json:"n_small"`
	Large        int     `json:"n_large"`
	Block        int     `json:"block"`
	Precision    int     `json:"precision"`
	Workers      int     `json:"workers"`
	Policy       string  `json:"policy"`
	Hypervisor   string  `json:"hypervisor"`
	GlobalS      float64 `json:"global_s"`
	StaticS      float64 `json:"static_s"`
	HypervisorS  float64 `json:"hypervisor_s"`
	GainVsStatic float64 `json:"gain_vs_static"`
	GainVsGlobal float64 `json:"gain_vs_global"`
	Hypervisors  []Gain  `json:"hypervisors"`
}

// withDefaults is opts with Run's defaults for its zero fields.
func (opts Options) withDefaults() Options {
	if opts.Small == 0 {
		opts.Small = 1024
	}
	if opts.Large == 0 {
		opts.Large = 2048
	}
	if opts.Block == 0 {
		opts.Block = 128
	}
	if opts.Precision == 0 {
		opts.Precision = 32
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if opts.Hypervisor == "" {
		opts.Hypervisor = "gflops_rate"
	}
	if opts.Repeat == 0 {
		opts.Repeat = 1
	}
	return opts
}

// Validate returns an error wrapping tiled.ErrBadOptions when opts (zero
// fields read as Run's defaults) are invalid: what Run refuses before it
// allocates or starts a scheduler, the memory check aside.
func (opts Options) Validate() error {
	opts = opts.withDefaults()
	if opts.Repeat < 0 {
		return fmt.Errorf("contexts: %w: repeat %d is negative", tiled.ErrBadOptions, opts.Repeat)
	}
	for _, sz := range []struct {
		name string
		n    int
	}{{"small", opts.Small}, {"large", opts.Large}} {
		// CheckShape suggests pzrun's -n, which is not this app's flag.
		if opts.Block > 0 && sz.n > 0 && sz.n%opts.Block != 0 {
			return fmt.Errorf("contexts: %w: the %s matrix's order %d (-%s) is not a multiple of the block size %d (-b); try -%s %d",
				tiled.ErrBadOptions, sz.name, sz.n, sz.name, opts.Block, sz.name, sz.n/opts.Block*opts.Block+opts.Block)
		}
		if err := tiled.CheckShape(sz.n, opts.Block, opts.Precision); err != nil {
			return fmt.Errorf("contexts: %s matrix (-%s): %w", sz.name, sz.name, err)
		}
	}
	if opts.Small > opts.Large {
		return fmt.Errorf("contexts: %w: the small matrix's order %d is above the large one's %d (swap them)", tiled.ErrBadOptions, opts.Small, opts.Large)
	}
	if opts.Workers < 0 || opts.Workers == 1 {
		return fmt.Errorf("contexts: %w: -workers %d; two contexts need at least 2 workers", tiled.ErrBadOptions, opts.Workers)
	}
	seen := map[string]bool{}
	for _, name := range strings.Split(opts.Hypervisor, ",") {
		switch {
		case name == "":
			return fmt.Errorf("contexts: %w: -hypervisor %q: an empty policy name in the list; valid policies are %s",
				tiled.ErrBadOptions, opts.Hypervisor, strings.Join(hypervisor.Policies(), ", "))
		case seen[name]:
			// Two runs of one policy would print two rows and two gains
			// under the same name; -repeat runs each mode again.
			return fmt.Errorf("contexts: %w: -hypervisor %q lists %s twice; use -repeat to run the modes again",
				tiled.ErrBadOptions, opts.Hypervisor, name)
		}
		seen[name] = true
		if !slices.Contains(hypervisor.Policies(), name) {
			// Said for the command line: the library's error names its
			// options (WithPolicyName, PZ_HYPERVISOR_POLICY).
			return fmt.Errorf("contexts: %w: -hypervisor %q: unknown policy %q; the policies are %s",
				tiled.ErrBadOptions, opts.Hypervisor, name, strings.Join(hypervisor.Policies(), ", "))
		}
		if _, err := hypervisor.PolicyByName(name, 0); err != nil {
			return fmt.Errorf("contexts: %w: -hypervisor %q: %w", tiled.ErrBadOptions, opts.Hypervisor, err)
		}
	}
	return nil
}

// Run factors two seeded SPD matrices of unequal sizes concurrently,
// several times on fresh schedulers of the same workers: in the global
// context, in two static contexts of half the workers each, and in the
// same two contexts under each hypervisor policy of opts.Hypervisor. It prints each run and the
// summary to out (a table, or JSON lines with opts.JSON) and returns
// them. Errors wrap tiled.ErrBadOptions for invalid options.
func Run(ctx context.Context, opts Options, out io.Writer) (*Result, error) {
	opts = opts.withDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := checkMemory(opts, tiled.AvailableMemory(ctx)); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	var (
		res *Result
		err error
	)
	if opts.Precision == 32 {
		res, err = run[float32](ctx, opts)
	} else {
		res, err = run[float64](ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	if out != nil {
		if opts.JSON {
			err = res.WriteJSON(out)
		} else {
			err = res.WriteTable(out)
		}
	}
	return res, err
}

// checkMemory refuses a run whose matrices do not fit in the available
// memory: both matrices and their tiles and, with Check, each factor and
// its fp64 copy.
func checkMemory(opts Options, available uint64) error {
	var need float64
	for _, n := range []int{opts.Small, opts.Large} {
		nt := n / opts.Block
		need += tiled.MatrixBytes(n, opts.Precision) + float64(nt)*float64(nt+1)/2*tiled.MatrixBytes(opts.Block, opts.Precision)
		if opts.Check {
			need += tiled.MatrixBytes(n, opts.Precision) + tiled.MatrixBytes(n, 64)
		}
	}
	what := fmt.Sprintf("fp%d matrices of orders %d and %d and their tiles", opts.Precision, opts.Small, opts.Large)
	if opts.Check {
		what += ", each factor and its fp64 copy"
	}
	if err := tiled.CheckMemory(need, what, available); err != nil {
		return fmt.Errorf("contexts: %w", err)
	}
	return nil
}

// modes of Run, in order.
const (
	modeGlobal     = "global"
	modeStatic     = "static"
	modeHypervisor = "hypervisor"
)

func run[T linalg.Float](ctx context.Context, opts Options) (*Result, error) {
	a0s := [2][]T{tiled.SPD[T](opts.Small, opts.Seed), tiled.SPD[T](opts.Large, opts.Seed+1)}
	cl := cholesky.NewCodelets[T]()
	res := &Result{Checked: opts.Check}
	type mode struct{ name, policy string }
	modes := []mode{{modeGlobal, ""}, {modeStatic, ""}}
	for _, p := range strings.Split(opts.Hypervisor, ",") {
		modes = append(modes, mode{modeHypervisor, p})
	}
	last := len(modes) - 1
	runs := make([][]ModeResult, len(modes))
	for r := 0; r < opts.Repeat; r++ {
		for i, m := range modes {
			o := opts
			if r < opts.Repeat-1 || i != last {
				o.Trace = "" // the trace is the last hypervisor run's
			}
			o.Hypervisor = m.policy
			mr, err := runMode(ctx, o, m.name, cl, a0s)
			if err != nil {
				return nil, err
			}
			mr.Runs = opts.Repeat
			runs[i] = append(runs[i], mr)
		}
	}
	med := make([]ModeResult, len(modes))
	for i := range runs {
		slices.SortFunc(runs[i], func(a, b ModeResult) int { return cmp.Compare(a.Makespan, b.Makespan) })
		med[i] = runs[i][opts.Repeat/2]
	}
	res.Global, res.Static = med[0], med[1]
	res.Hypervisors = med[2:]
	res.Hypervisor = res.Hypervisors[0]
	var idle float64
	for _, h := range res.Hypervisors {
		if h.Hypervisor == "idle" {
			idle = h.Makespan
		}
	}
	for _, h := range res.Hypervisors {
		g := Gain{Policy: h.Hypervisor, Makespan: h.Makespan}
		if h.Makespan > 0 {
			g.VsStatic, g.VsGlobal, g.VsIdle = res.Static.Makespan/h.Makespan, res.Global.Makespan/h.Makespan, idle/h.Makespan
		}
		res.Gains = append(res.Gains, g)
	}
	res.GainVsStatic, res.GainVsGlobal = res.Gains[0].VsStatic, res.Gains[0].VsGlobal
	return res, nil
}

// runMode runs both factorizations on a new scheduler in one mode.
func runMode[T linalg.Float](ctx context.Context, opts Options, mode string, cl *cholesky.Codelets, a0s [2][]T) (res ModeResult, err error) {
	// The scheduler logs every context resize at Info: only with
	// LogResizes (pzrun contexts -v); its warnings always.
	schedLog := opts.Logger
	if !opts.LogResizes && schedLog != nil {
		schedLog = schedLog.WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))
	}
	sopts := []scheduler.Option{scheduler.WithLogger(schedLog)}
	if opts.Policy != "" {
		sopts = append(sopts, scheduler.WithPolicy(opts.Policy))
	}
	if opts.Workers > 0 {
		sopts = append(sopts, scheduler.WithWorkers(opts.Workers))
	}
	trace := mode == modeHypervisor && opts.Trace != ""
	if trace {
		sopts = append(sopts, scheduler.WithStats(true))
	}
	s, err := scheduler.New(ctx, sopts...)
	if err != nil {
		return ModeResult{}, fmt.Errorf("contexts: %w", err)
	}
	var hv *hypervisor.Hypervisor
	defer func() {
		// Counted once the hypervisor and the scheduler are closed (the
		// defers below run first, hv.Close before s.Close): a decision
		// under way on a worker - a hook the run's last tasks or an idle
		// worker called - has ended, so the count holds every resize
		// made (and logged with -v). Read when the factorizations
		// ended, it missed one still being applied.
		if hv != nil && res.Mode == modeHypervisor {
			res.Resizes = hv.ResizeCount()
		}
	}()
	defer func() {
		if cerr := s.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("contexts: closing the scheduler: %w", cerr)
		}
	}()
	nw := len(s.Workers())
	if nw < 2 {
		return ModeResult{}, fmt.Errorf("contexts: %w: the scheduler has %d worker (one per core this process may use, under mpirun its rank's share of the host's; or PZ_NCPU); two contexts need at least 2: ask for them (pzrun contexts -workers 2, Options.Workers)", tiled.ErrBadOptions, nw)
	}
	mr := ModeResult{App: "contexts", Mode: mode, Small: opts.Small, Large: opts.Large, Block: opts.Block,
		Precision: opts.Precision, Workers: nw, Policy: s.Policy()}
	ns := [2]int{opts.Small, opts.Large}
	var cs [2]*scheduler.Context
	if mode != modeGlobal {
		for i, name := range []string{"small", "large"} {
			co := []scheduler.ContextOption{scheduler.ContextSize(nw / 2)}
			if i == 1 {
				co = []scheduler.ContextOption{scheduler.ContextSize(nw - nw/2)}
			}
			if opts.Policy != "" {
				co = append(co, scheduler.ContextPolicy(opts.Policy))
			}
			if cs[i], err = s.NewContext(name, co...); err != nil {
				return mr, fmt.Errorf("contexts: %w", err)
			}
		}
		if mode == modeHypervisor {
			mr.Hypervisor = opts.Hypervisor
			hvLog := opts.Logger
			if !opts.LogResizes {
				hvLog = hvLog.WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))
			}
			hvOpts := []hypervisor.Option{hypervisor.WithPolicyName(opts.Hypervisor), hypervisor.WithLogger(hvLog)}
			var driven *hypervisor.AppDriven
			if opts.Hypervisor == "app_driven" {
				driven = hypervisor.NewAppDriven()
				hvOpts = append(hvOpts, hypervisor.WithPolicy(driven))
			}
			hv, err = hypervisor.New(s, hvOpts...)
			if err != nil {
				return mr, fmt.Errorf("contexts: %w", err)
			}
			defer hv.Close()
			if driven != nil {
				if err := driven.OnTag(doneTag, cs[0], cs[1], len(cs[0].Workers())); err != nil {
					return mr, fmt.Errorf("contexts: %w", err)
				}
			}
			for i, c := range cs {
				if err := hv.Register(c, hypervisor.Limits{TotalFlops: choleskyTaskFlops(ns[i], opts.Block)}); err != nil {
					return mr, fmt.Errorf("contexts: %w", err)
				}
				if opts.Hypervisor == "teft" {
					// teft plans from every type of task left: announce
					// them all before the first is submitted.
					for cl, n := range choleskyTaskCounts(cl, ns[i]/opts.Block) {
						if err := hv.AnnounceTasks(c, cl, n); err != nil {
							return mr, fmt.Errorf("contexts: %w", err)
						}
					}
				}
			}
		}
	}
	ms := [2]*cholesky.TileMatrix[T]{cholesky.ToTiles(a0s[0], ns[0], opts.Block), cholesky.ToTiles(a0s[1], ns[1], opts.Block)}
	var took [2]time.Duration
	t0 := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for i := range ms {
		g.Go(func() error {
			c := gctx
			if cs[i] != nil {
				// Every task of this factorization goes to its context,
				// and FactorTiles' WaitAll waits for that context only.
				c = scheduler.Within(gctx, cs[i])
			}
			d, err := cholesky.FactorTiles(c, s, cl, ms[i], nil)
			took[i] = d
			if err == nil && i == 0 && mode == modeHypervisor && opts.Hypervisor == "app_driven" {
				// The small factorization is done: its workers may go.
				// The tagged task is waited for: the hypervisor's Close
				// (deferred) applies the request of a tagged task that
				// completed before it, even when its hook had not run
				// yet (the large factorization ended first).
				done := scheduler.NewTask(&scheduler.Codelet{Name: "small_done", CPU: func(*scheduler.Call) error { return nil }},
					scheduler.WithTag(doneTag))
				if err = s.SubmitTask(c, done); err == nil {
					err = done.Wait(c)
				}
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return mr, fmt.Errorf("contexts: %s run: %w", mode, err)
	}
	makespan := time.Since(t0)
	mr.Makespan = makespan.Seconds()
	mr.SmallSeconds, mr.LargeSeconds = took[0].Seconds(), took[1].Seconds()
	mr.GFlops = tiled.GFlops(linalg.CholeskyFlops(ns[0])+linalg.CholeskyFlops(ns[1]), makespan)
	if opts.Check {
		mr.Checked = true
		for i, m := range ms {
			l := make([]T, ns[i]*ns[i])
			m.CopyTo(l)
			r, err := cholesky.Residual(ctx, a0s[i], l, ns[i], opts.Block, nw)
			if err != nil {
				return mr, fmt.Errorf("contexts: %w", err)
			}
			if i == 0 {
				mr.ResidualSmall = r
			} else {
				mr.ResidualLarge = r
			}
		}
	}
	if trace {
		if err := s.WriteTraceFiles(opts.Trace); err != nil {
			return mr, err
		}
	}
	return mr, nil
}

// choleskyTaskFlops is the sum of the tile tasks' flops (the codelets'
// Flops) of a Cholesky of order n in b×b tiles: what the hypervisor
// counts as done.
func choleskyTaskFlops(n, b int) float64 {
	nt := n / b
	var f float64
	for k := range nt {
		m := float64(nt - k - 1)
		f += linalg.PotrfFlops(b) + m*linalg.TrsmFlops(b, b) + m*linalg.SyrkFlops(b, b) + m*(m-1)/2*linalg.GemmFlops(b, b, b)
	}
	return f
}

// choleskyTaskCounts returns the number of tasks of each codelet of a
// tiled Cholesky of nt×nt tiles (cholesky.FactorTiles' graph).
func choleskyTaskCounts(cl *cholesky.Codelets, nt int) map[*scheduler.Codelet]int {
	return map[*scheduler.Codelet]int{
		cl.Potrf: nt,
		cl.Trsm:  nt * (nt - 1) / 2,
		cl.Syrk:  nt * (nt - 1) / 2,
		cl.Gemm:  nt * (nt - 1) * (nt - 2) / 6,
	}
}

// WriteJSON writes the runs and the summary as JSON lines.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, m := range append([]ModeResult{r.Global, r.Static}, r.Hypervisors...) {
		if err := enc.Encode(m); err != nil {
			return err
		}
	}
	h := r.Hypervisor
	return enc.Encode(summary{App: "contexts", Mode: "summary", Small: h.Small, Large: h.Large, Block: h.Block,
		Precision: h.Precision, Workers: h.Workers, Policy: h.Policy, Hypervisor: h.Hypervisor,
		GlobalS: r.Global.Makespan, StaticS: r.Static.Makespan, HypervisorS: h.Makespan,
		GainVsStatic: r.GainVsStatic, GainVsGlobal: r.GainVsGlobal, Hypervisors: r.Gains})
}

// WriteTable writes the runs as a table and the gain as a sentence.
func (r *Result) WriteTable(w io.Writer) error {
	h := r.Hypervisor
	fmt.Fprintf(w, "two Choleskys n=%d and n=%d, tile %d, fp%d, %d workers, policy %s\n", h.Small, h.Large, h.Block, h.Precision, h.Workers, h.Policy)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	residuals := func(m ModeResult) string { return "" }
	head := "mode\tmakespan s\tsmall s\tlarge s\tGFLOP/s\tresizes\t"
	if r.Checked {
		head += "residual small\tresidual large\t"
		residuals = func(m ModeResult) string { return fmt.Sprintf("%.2e\t%.2e\t", m.ResidualSmall, m.ResidualLarge) }
	}
	fmt.Fprintln(tw, head)
	for _, m := range append([]ModeResult{r.Global, r.Static}, r.Hypervisors...) {
		name := m.Mode
		if m.Hypervisor != "" {
			name += " (" + m.Hypervisor + ")"
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.2f\t%d\t%s\n", name, m.Makespan, m.SmallSeconds, m.LargeSeconds, m.GFlops, m.Resizes, residuals(m))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, g := range r.Gains {
		vsIdle := ""
		if g.VsIdle > 0 && g.Policy != "idle" {
			vsIdle = fmt.Sprintf(", %.2fx idle", g.VsIdle)
		}
		if _, err := fmt.Fprintf(w, "hypervisor gain (%s): %.2fx the static split, %.2fx the global context%s\n", g.Policy, g.VsStatic, g.VsGlobal, vsIdle); err != nil {
			return err
		}
	}
	return nil
}
