package scheduler

import "fmt"

// WithWorkerNames names CPU workers in traces (their thread names), Gantt
// charts (their rows) and WorkerName: names[w] replaces "cpu<w>" for
// worker w, a CPU worker (0 <= w < the count of WithWorkers). A program
// whose workers stand for cores elsewhere names them after where they
// run, as scheduler/dist's master/worker mode names its proxies after
// their rank ("rank 2 cpu1"). New fails with ErrBadOption for another w
// or an empty name.
func WithWorkerNames(names map[int]string) Option {
	return func(c *config) { c.names = names }
}

// checkNames validates WithWorkerNames' map against the CPU workers.
func (c *config) checkNames() error {
	for w, n := range c.names {
		if w < 0 || w >= c.workers {
			return fmt.Errorf("%w: WithWorkerNames: worker %d is not a CPU worker (there are %d, 0 to %d)", ErrBadOption, w, c.workers, c.workers-1)
		}
		if n == "" {
			return fmt.Errorf("%w: WithWorkerNames: worker %d has an empty name; leave it out to keep cpu%d", ErrBadOption, w, w)
		}
	}
	return nil
}
