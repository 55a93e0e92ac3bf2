package scheduler

import (
	"fmt"
	"maps"
	"slices"
)

// WithWorkerNames names CPU workers in traces (their thread names), Gantt
// charts (their rows) and WorkerName: names[w] replaces "cpu<w>" for
// worker w, a CPU worker (0 <= w < the count of WithWorkers). A program
// whose workers stand for cores elsewhere names them after where they
// run, as scheduler/dist's master/worker mode names its proxies after
// their rank ("rank 2 cpu1"). New copies the map. New fails with
// ErrBadOption for another w, an empty name, or a name that another
// worker has (given here, or its own "cpu<k>"): a trace's threads and a
// chart's rows must tell the workers apart.
func WithWorkerNames(names map[int]string) Option {
	return func(c *config) { c.names = maps.Clone(names) }
}

// checkNames validates WithWorkerNames' map against the CPU workers.
func (c *config) checkNames() error {
	by := make(map[string]int, len(c.names))
	for _, w := range slices.Sorted(maps.Keys(c.names)) {
		n := c.names[w]
		if w < 0 || w >= c.workers {
			return fmt.Errorf("%w: WithWorkerNames: worker %d is not a CPU worker (there are %d, 0 to %d)", ErrBadOption, w, c.workers, c.workers-1)
		}
		if n == "" {
			return fmt.Errorf("%w: WithWorkerNames: worker %d has an empty name; leave it out to keep cpu%d", ErrBadOption, w, w)
		}
		if o, ok := by[n]; ok {
			return fmt.Errorf("%w: WithWorkerNames: workers %d and %d are both named %q; give each its own name", ErrBadOption, o, w, n)
		}
		by[n] = w
	}
	// A given name may not be another worker's default one (cpu<k>,
	// k not renamed).
	for k := range c.workers {
		if _, renamed := c.names[k]; renamed {
			continue
		}
		if w, ok := by[fmt.Sprintf("%v%d", CPUWorker, k)]; ok {
			return fmt.Errorf("%w: WithWorkerNames: worker %d is named %q, the name of worker %d; give it another, or rename worker %d too", ErrBadOption, w, c.names[w], k, k)
		}
	}
	return nil
}
