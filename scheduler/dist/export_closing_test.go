package dist

// Closing says whether Close has begun on this rank of d, for tests that
// wait for it.
func Closing(d *Scheduler) bool {
	return d.closing.Load()
}
