package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"

	"github.com/pzgo/pz/resourceset"
	"github.com/pzgo/pz/runtimeview"
)

// helloLine is what each rank reports to the root.
type helloLine struct {
	Rank    int    `json:"rank"`
	Size    int    `json:"size"`
	Host    string `json:"host"`
	Backend string `json:"backend"`
	Procs   int    `json:"gomaxprocs"`
}

func helloApp() app {
	return app{
		name:    "hello",
		summary: "every rank reports its rank, size and host through the root, one line per rank",
		setup: func(fs *flag.FlagSet, e *env) func(context.Context, *runtimeview.RuntimeView) error {
			asJSON := fs.Bool("json", false, "print one JSON object per rank: rank, size, host, backend, gomaxprocs")
			return func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				mine := helloLine{
					Rank: rt.Rank(), Size: rt.Size(), Host: rt.MyResourceSet().Host().Hostname,
					Backend: string(rt.Backend()), Procs: runtime.GOMAXPROCS(0),
				}
				lines, ok, err := resourceset.GatherValues(ctx, rt.ResourceSet(0), mine)
				if err != nil || !ok {
					return err
				}
				for _, l := range lines {
					if *asJSON {
						if err := writeJSON(e.stdout, l); err != nil {
							return err
						}
						continue
					}
					fmt.Fprintf(e.stdout, "hello from rank %d of %d on %s (%s backend)\n", l.Rank, l.Size, l.Host, l.Backend)
				}
				return nil
			}
		},
	}
}
