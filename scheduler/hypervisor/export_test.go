package hypervisor

// WithOnBusy is a test seam: f is called when a decision is left
// pending because another one holds the decision lock, right after the
// pending trigger is recorded.
func WithOnBusy(f func(Trigger)) Option { return func(c *config) { c.onBusy = f } }

// WithOnCloseWait is a test seam: f is called when Close finds a
// decision under way, right before it waits for it.
func WithOnCloseWait(f func()) Option { return func(c *config) { c.onCloseWait = f } }
