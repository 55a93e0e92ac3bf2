package dist

// CtrlTag is the tag of control messages (data transfers of handle id use
// id+1), for tests that watch the messages.
const CtrlTag = ctrlTag

// CheckWindow is the number of submissions the ranks compare at once.
const CheckWindow = checkWindow

// GraphFailed returns a channel closed once d knows that its graph
// failed (a failure here, or heard of), for tests that wait for it.
func GraphFailed(d *Scheduler) <-chan struct{} { return d.graph.Done() }
