package spin

// Pause executes the x86 PAUSE instruction: a polling loop that calls it
// between checks leaves a hyperthread sibling (or a vCPU the host runs
// on one) most of the core.
func Pause()
