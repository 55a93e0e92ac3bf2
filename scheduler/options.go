package scheduler

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/pzgo/pz/hardware/accel"
)

// An Option configures New. Explicit options take precedence over the
// environment variables named in their documentation, which take
// precedence over the defaults.
type Option func(*config)

type config struct {
	policy     string
	policyImpl func(PolicyConfig) Policy
	workers    int
	workersSet bool // WithWorkers given: PZ_NCPU and the default do not apply
	modelDir   string
	modelSet   bool
	trace      string
	stats      bool
	getenv     func(string) string
	spin       int
	spinSet    bool           // WithSpin given
	driven     int            // workers left to the application (WithDrivenWorkers)
	logger     *zap.Logger    // context resizes (WithLogger)
	sims       []SimDevice    // simulated devices (WithSimDevices)
	devices    []accel.Device // the caller's devices (WithDevices)
	cuda       cudaConfig     // GPUs the scheduler opens (WithCUDA)

	links map[int]WorkerLink // WithWorkerLinks
	names map[int]string     // WithWorkerNames

	watchdog       time.Duration // WithWatchdog, PZ_WATCHDOG; 0: off
	watchdogSet    bool
	watchdogReport func(Stall)

	teamHook func(at string) // internal tests only: see Scheduler.teamHook
}

// WithDrivenWorkers leaves the last n CPU workers to the application: the
// scheduler starts no goroutine for them, and the program drives each
// one from a goroutine (and OS thread) of its own through
// Scheduler.Driver. n must not exceed the number of workers.
func WithDrivenWorkers(n int) Option { return func(c *config) { c.driven = n } }

// WithPolicy selects a scheduling policy by name: "eager", "prio",
// "random", "ws", "lws" (default) or "dmda". Environment: PZ_SCHED.
func WithPolicy(name string) Option { return func(c *config) { c.policy = name } }

// WithPolicyFunc installs a custom policy, built by newPolicy once the
// workers are known. It overrides WithPolicy and PZ_SCHED.
func WithPolicyFunc(newPolicy func(PolicyConfig) Policy) Option {
	return func(c *config) { c.policyImpl = newPolicy }
}

// WithWorkers sets the number of CPU workers (default: one per core this
// process may use, min(runtime.NumCPU(), GOMAXPROCS)). Environment:
// PZ_NCPU.
func WithWorkers(n int) Option { return func(c *config) { c.workers, c.workersSet = n, true } }

// WithPerfModelDir sets the directory where performance models are
// loaded from and saved to (default: os.UserCacheDir()/pz/perfmodels;
// models stay in memory if there is none). An empty dir keeps models in
// memory only. Environment: PZ_PERFMODEL_DIR.
//
// Close saves the models and reports what it could not save (an
// unwritable directory), the bus model of the devices included; the
// tasks' results are unaffected. A model file that cannot be read or
// parsed, or that holds invalid values (a negative count or time, an
// unknown worker kind, another model's name), is neither used nor
// overwritten: its model starts uncalibrated and Close's error, wrapping
// ErrBadModel, names the file and what is wrong with it.
func WithPerfModelDir(dir string) Option {
	return func(c *config) { c.modelDir, c.modelSet = dir, true }
}

// WithTrace makes Close write a Chrome trace JSON of every task to file
// (open it in Perfetto or chrome://tracing) and a Gantt chart SVG beside
// it (file with its extension replaced by .svg, see WriteTraceFiles). It
// turns on WithStats. A file ending in .svg is refused (New fails with
// ErrBadOption): the chart would overwrite the trace. Environment:
// PZ_TRACE.
func WithTrace(file string) Option { return func(c *config) { c.trace = file } }

// WithStats turns on per-worker busy and idle time measurement (two
// clock reads per task, about 70 ns). Environment: PZ_STATS=1.
func WithStats(on bool) Option { return func(c *config) { c.stats = on } }

// WithGetenv replaces os.Getenv for the PZ_* variables (for tests and
// embedding).
func WithGetenv(getenv func(string) string) Option { return func(c *config) { c.getenv = getenv } }

// WithSpin sets how many times an idle worker polls for work before it
// sleeps (default 64); 0 sleeps at once. A worker publishes the tasks it
// completed (for WaitAll and Stats) when it sleeps, or after 64 polls
// when it polls longer, so that WaitAll does not wait for a long spin
// to end.
func WithSpin(n int) Option { return func(c *config) { c.spin, c.spinSet = n, true } }

func buildConfig(opts []Option) (config, error) {
	c := config{}
	stats := false
	for i, o := range opts {
		if o == nil {
			return c, fmt.Errorf("%w: option %d of %d is nil (an Option variable left unset?)", ErrBadOption, i+1, len(opts))
		}
		o(&c)
	}
	if c.stats {
		stats = true
	}
	env := c.getenv
	if env == nil {
		env = os.Getenv
	}
	if c.policy == "" {
		c.policy = env("PZ_SCHED")
	}
	if c.policy == "" {
		c.policy = "lws"
	}
	if len(c.sims) == 0 && len(c.devices) == 0 {
		sims, err := SimDevicesFromEnv(env)
		if err != nil {
			return c, err
		}
		c.sims = sims
	}
	if len(c.sims) > maxSimDevices {
		return c, fmt.Errorf("%w: %d simulated devices (PZ_NSIM or WithSimDevices): at most %d; each is a memory node with workers of its own, and idle workers look at one another's queues (PZ_NSIM=1000000 kept New busy for minutes); for its memory size, PZ_SIM_MEMORY", ErrBadOption, len(c.sims), maxSimDevices)
	}
	for i, d := range c.sims {
		if d.Memory < 0 {
			return c, fmt.Errorf("%w: simulated device %d has %d bytes of memory (need > 0, or 0 for the default)", ErrBadOption, i, d.Memory)
		}
		if d.Memory > 0 && d.Memory < minSimMemory {
			// New measured its link and failed with "out of device
			// memory: sim0: 16 bytes asked, 0 of 8 in use".
			return c, fmt.Errorf("%w: simulated device %d has %d bytes of memory: it needs at least %d, as New measures its link to RAM with copies of that size (sizes such as 64MiB, or 0 for the default)", ErrBadOption, i, d.Memory, minSimMemory)
		}
		if d.Latency < 0 {
			return c, fmt.Errorf("%w: simulated device %d has latency %v (need >= 0)", ErrBadOption, i, d.Latency)
		}
		if d.Workers < 0 {
			return c, fmt.Errorf("%w: simulated device %d has %d workers (need >= 1, or 0 for the default)", ErrBadOption, i, d.Workers)
		}
		c.sims[i] = d.withDefaults()
	}
	cudaEnv := env
	if len(c.devices) > 0 {
		// The caller's devices (the RuntimeView's, GPUs included) replace
		// the environment's, as they replace PZ_NSIM.
		cudaEnv = func(k string) string {
			if k == "PZ_NCUDA" {
				return ""
			}
			return env(k)
		}
	}
	if err := c.cuda.resolve(cudaEnv); err != nil {
		return c, err
	}
	c.cuda.skipGiven(c.devices)
	if !c.workersSet {
		if v := env("PZ_NCPU"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return c, fmt.Errorf("%w: PZ_NCPU=%q is not a positive integer", ErrBadOption, v)
			}
			c.workers = n
		} else {
			// Each device's worker takes a core.
			c.workers = max(1, min(runtime.NumCPU(), runtime.GOMAXPROCS(0))-len(c.sims)-len(c.devices)-len(c.cuda.ordinals))
		}
	}
	if c.workers < 1 {
		return c, fmt.Errorf("%w: WithWorkers(%d): need at least one worker", ErrBadOption, c.workers)
	}
	if c.workers > maxWorkers {
		what := fmt.Sprintf("WithWorkers(%d)", c.workers)
		if !c.workersSet {
			what = fmt.Sprintf("PZ_NCPU=%d", c.workers)
		}
		return c, fmt.Errorf("%w: %s: at most %d CPU workers (this process may use %d cores); idle workers look at one another's queues, so that PZ_NCPU=100000 kept New from returning", ErrBadOption, what, maxWorkers, min(runtime.NumCPU(), runtime.GOMAXPROCS(0)))
	}
	if err := c.checkLinks(); err != nil {
		return c, err
	}
	if err := c.checkNames(); err != nil {
		return c, err
	}
	if c.driven < 0 {
		return c, fmt.Errorf("%w: WithDrivenWorkers(%d): the count of driven workers cannot be negative", ErrBadOption, c.driven)
	}
	if c.driven > c.workers {
		return c, fmt.Errorf("%w: WithDrivenWorkers(%d): the scheduler has %d workers", ErrBadOption, c.driven, c.workers)
	}
	if !c.modelSet {
		c.modelDir = env("PZ_PERFMODEL_DIR")
	}
	if !c.modelSet && c.modelDir == "" {
		if d, err := os.UserCacheDir(); err == nil {
			c.modelDir = filepath.Join(d, "pz", "perfmodels")
		}
	}
	traceOpt := "WithTrace"
	if c.trace == "" {
		c.trace, traceOpt = env("PZ_TRACE"), "PZ_TRACE"
	}
	if err := CheckTraceFile(c.trace); err != nil {
		return c, fmt.Errorf("%w: %s(%q): %w", ErrBadOption, traceOpt, c.trace, err)
	}
	if !stats {
		switch v := env("PZ_STATS"); v {
		case "", "0", "false":
		case "1", "true":
			stats = true
		default:
			return c, fmt.Errorf("%w: PZ_STATS=%q (want 0 or 1)", ErrBadOption, v)
		}
	}
	c.stats = stats || c.trace != ""
	if !c.watchdogSet {
		if v := env("PZ_WATCHDOG"); v != "" && v != "0" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return c, fmt.Errorf("%w: PZ_WATCHDOG=%q is not a positive duration (such as 30s or 2m; 0 turns the watchdog off)", ErrBadOption, v)
			}
			c.watchdog = d
		}
	} else if c.watchdog < 0 {
		return c, fmt.Errorf("%w: WithWatchdog(%v): the timeout cannot be negative (0 turns the watchdog off)", ErrBadOption, c.watchdog)
	}
	switch {
	case !c.spinSet:
		c.spin = 64
	case c.spin < 0:
		return c, fmt.Errorf("%w: WithSpin(%d): the count of polls cannot be negative (0 sleeps at once)", ErrBadOption, c.spin)
	}
	return c, nil
}

// WithLogger sets the logger that records every context resize (Info
// for the hypervisor's and a deletion's, Debug for the program's own
// AddWorkers, RemoveWorkers, MoveWorkers and NewContext) and workers
// lent at Close (Warn). Default: none.
func WithLogger(l *zap.Logger) Option { return func(c *config) { c.logger = l } }

// minSimMemory is the least memory of a simulated device: New measures
// the link to it with copies of two float64s (measureLink).
const minSimMemory = 16

// maxWorkers bounds a scheduler's CPU workers: 4096 of them ran 1000
// empty tasks in 6.7 s on 2 cores (1024 in 60 ms), and more kept New
// busy for minutes.
const maxWorkers = 1024

// maxSimDevices bounds the simulated devices of a scheduler: more than
// any node has accelerators.
const maxSimDevices = 256

// SimDevicesFromEnv returns the simulated devices the environment asks
// for: PZ_NSIM of them (none when unset or 0), each with PZ_SIM_MEMORY
// bytes of memory when set (ParseBytes: 64MiB, 2GiB...), other fields at
// their defaults. The error wraps ErrBadOption and names the variable.
// The RuntimeView reads the same variables through it.
func SimDevicesFromEnv(getenv func(string) string) ([]SimDevice, error) {
	v := getenv("PZ_NSIM")
	if v == "" || v == "0" {
		return nil, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%w: PZ_NSIM=%q is not a number of devices", ErrBadOption, v)
	}
	if n > maxSimDevices {
		// Before making them: a size given here by mistake (PZ_NSIM=1000000
		// for PZ_SIM_MEMORY) would allocate a million descriptions.
		return nil, fmt.Errorf("%w: PZ_NSIM=%d: at most %d simulated devices (the memory of each is PZ_SIM_MEMORY)", ErrBadOption, n, maxSimDevices)
	}
	var d SimDevice
	if m := getenv("PZ_SIM_MEMORY"); m != "" {
		b, err := ParseBytes(m)
		if err != nil || b <= 0 {
			return nil, fmt.Errorf("%w: PZ_SIM_MEMORY=%q is not a size (bytes, or 64MiB, 2GiB...)", ErrBadOption, m)
		}
		d.Memory = b
	}
	devs := make([]SimDevice, n)
	for i := range devs {
		devs[i] = d
	}
	return devs, nil
}

// ParseBytes parses a size in bytes: a number with an optional suffix
// k, M, G, T (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024),
// as in "64MiB" or "1.5G".
//
// A size past the largest int64 or that is not a whole number of bytes
// ("0.5B", "1.5") is an error.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	in := s
	mult := 1.0
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"B", 1}}
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("scheduler: %q is not a size in bytes", in)
	}
	b := f * mult
	if b >= math.MaxInt64 { // 2^63: float64 has no MaxInt64 itself
		return 0, fmt.Errorf("scheduler: %q is past the largest size, %d bytes", in, int64(math.MaxInt64))
	}
	if b != math.Trunc(b) {
		return 0, fmt.Errorf("scheduler: %q is not a whole number of bytes", in)
	}
	return int64(b), nil
}
