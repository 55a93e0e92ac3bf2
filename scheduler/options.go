package scheduler

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"go.uber.org/zap"
)

// An Option configures New. Explicit options take precedence over the
// environment variables named in their documentation, which take
// precedence over the defaults.
type Option func(*config)

type config struct {
	policy     string
	policyImpl func(PolicyConfig) Policy
	workers    int
	modelDir   string
	modelSet   bool
	trace      string
	stats      bool
	getenv     func(string) string
	spin       int
	driven     int         // workers left to the application (WithDrivenWorkers)
	logger     *zap.Logger // context resizes (WithLogger)
}

// WithDrivenWorkers leaves the last n workers to the application: the
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
func WithWorkers(n int) Option { return func(c *config) { c.workers = n } }

// WithPerfModelDir sets the directory where performance models are
// loaded from and saved to (default: os.UserCacheDir()/pz/perfmodels;
// models stay in memory if there is none). An empty dir keeps models in
// memory only. Environment: PZ_PERFMODEL_DIR.
func WithPerfModelDir(dir string) Option {
	return func(c *config) { c.modelDir, c.modelSet = dir, true }
}

// WithTrace makes Close write a Chrome trace JSON of every task to file
// (open it in Perfetto or chrome://tracing) and a Gantt chart SVG beside
// it (file with its extension replaced by .svg). It turns on WithStats.
// Environment: PZ_TRACE.
func WithTrace(file string) Option { return func(c *config) { c.trace = file } }

// WithStats turns on per-worker busy and idle time measurement (two
// clock reads per task, about 70 ns). Environment: PZ_STATS=1.
func WithStats(on bool) Option { return func(c *config) { c.stats = on } }

// WithGetenv replaces os.Getenv for the PZ_* variables (for tests and
// embedding).
func WithGetenv(getenv func(string) string) Option { return func(c *config) { c.getenv = getenv } }

// WithSpin sets how many times an idle worker polls for work before it
// sleeps (default 64); 0 sleeps at once.
func WithSpin(n int) Option { return func(c *config) { c.spin = n } }

func buildConfig(opts []Option) (config, error) {
	c := config{workers: -1, spin: -1}
	stats := false
	for _, o := range opts {
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
	if c.workers < 0 {
		if v := env("PZ_NCPU"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return c, fmt.Errorf("%w: PZ_NCPU=%q is not a positive integer", ErrBadOption, v)
			}
			c.workers = n
		} else {
			c.workers = min(runtime.NumCPU(), runtime.GOMAXPROCS(0))
		}
	}
	if c.workers < 1 {
		return c, fmt.Errorf("%w: WithWorkers(%d): need at least one worker", ErrBadOption, c.workers)
	}
	if c.driven < 0 || c.driven > c.workers {
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
	if c.trace == "" {
		c.trace = env("PZ_TRACE")
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
	if c.spin < 0 {
		c.spin = 64
	}
	return c, nil
}

// WithLogger sets the logger that records every context resize (Info)
// and workers lent at Close (Warn). Default: none.
func WithLogger(l *zap.Logger) Option { return func(c *config) { c.logger = l } }
