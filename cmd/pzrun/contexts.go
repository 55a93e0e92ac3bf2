package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/pzgo/pz/internal/apps/contexts"
	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler/hypervisor"
)

func contextsApp() app {
	return app{
		name:    "contexts",
		summary: "two concurrent tiled Choleskys of unequal sizes: one global context, two static contexts, two contexts under each hypervisor policy given",
		oneRank: true,
		setup: func(fs *flag.FlagSet, e *env) func(context.Context, *runtimeview.RuntimeView) error {
			var o contexts.Options
			fs.IntVar(&o.Small, "small", 2048, "order of the small matrix")
			fs.IntVar(&o.Large, "large", 4096, "order of the large matrix")
			fs.IntVar(&o.Block, "b", 256, "tile size")
			fs.IntVar(&o.Precision, "precision", 32, "32 or 64")
			fs.IntVar(&o.Workers, "workers", 0, "CPU workers (at least 2; default: PZ_NCPU, else one per allowed core)")
			fs.StringVar(&o.Policy, "policy", "", "scheduling policy inside each context")
			fs.StringVar(&o.Hypervisor, "hypervisor", "gflops_rate", "hypervisor policy, or a comma-separated list run in turn (idle,feft,teft): "+strings.Join(hypervisor.Policies(), ", "))
			fs.IntVar(&o.Repeat, "repeat", 1, "run the modes this many times, interleaved, and report the median of each")
			fs.BoolVar(&o.Check, "check", false, "compute each factorization's residual")
			fs.StringVar(&o.Trace, "trace", "", "write the hypervisor run's Chrome trace to `FILE` and its Gantt SVG beside it")
			fs.BoolVar(&o.JSON, "json", false, "print JSON lines instead of a table")
			fs.BoolVar(&o.LogResizes, "v", false, "log every hypervisor resize and refused move (stderr); without it only the counts are reported")
			// Before any rank starts (env.validate).
			e.validate = func(int, io.Writer) error {
				if err := validPolicy(o.Policy); err != nil {
					return err
				}
				if err := checkTraceFile("-trace", o.Trace); err != nil {
					return err
				}
				// The library reads "" as its default policy: given on the
				// command line, it is a mistake (an unset variable).
				if o.Hypervisor == "" {
					return fmt.Errorf("%w: -hypervisor \"\": name a hypervisor policy (default gflops_rate), or a comma-separated list run in turn; the policies are %s", errUsage, strings.Join(hypervisor.Policies(), ", "))
				}
				// The library reads 0 as its own defaults, which are not
				// these flags'.
				if o.Small < 1 || o.Large < 1 || o.Block < 1 {
					return fmt.Errorf("%w: -small %d, -large %d and -b %d must be positive (defaults 2048, 4096, 256)", errUsage, o.Small, o.Large, o.Block)
				}
				if o.Repeat < 1 {
					return fmt.Errorf("%w: -repeat %d: want at least 1", errUsage, o.Repeat)
				}
				if err := o.Validate(); err != nil {
					return badOptions(err, tiled.ErrBadOptions)
				}
				return nil
			}
			return func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				if err := e.validate(rt.Size(), io.Discard); err != nil {
					return err
				}
				o.Logger = rt.Logger()
				_, err := contexts.Run(ctx, o, e.stdout)
				if errors.Is(err, tiled.ErrBadOptions) {
					return badOptions(err, tiled.ErrBadOptions)
				}
				return err
			}
		},
	}
}
