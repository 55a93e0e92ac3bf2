package dist

// Closing says whether Close has begun on this rank of d, for tests that
// wait for it.
func Closing(d *Scheduler) bool {
	return d.closing.Load()
}

// Waiting says whether a WaitAll or Close's wait holds this rank of d
// at its point of the graph, for tests that wait for it.
func Waiting(d *Scheduler) bool {
	return len(d.waitSem) == 1
}
