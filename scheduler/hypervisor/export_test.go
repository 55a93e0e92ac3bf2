package hypervisor

import (
	"time"

	"github.com/pzgo/pz/scheduler"
)

// WithOnBusy is a test seam: f is called when a decision is left
// pending because another one holds the decision lock, right after the
// pending trigger is recorded.
func WithOnBusy(f func(Trigger)) Option { return func(c *config) { c.onBusy = f } }

// WithOnCloseWait is a test seam: f is called when Close finds a
// decision under way, right before it waits for it.
func WithOnCloseWait(f func()) Option { return func(c *config) { c.onCloseWait = f } }

// WithOnNextIdle is a test seam: f is called with every answer of
// NextIdleCycle (next 0: the worker sleeps until an event).
func WithOnNextIdle(f func(worker int, next time.Duration)) Option {
	return func(c *config) { c.onNextIdle = f }
}

// Quiet returns the idle backoff: the least time between two decisions
// of the idle and speed triggers now (0 or 1ns: none).
func (h *Hypervisor) Quiet() time.Duration { return time.Duration(h.quiet.Load()) }

// MaxQuiet is the idle backoff's bound.
const MaxQuiet = maxQuiet

// WithOnClosing is a test seam: f is called by the first Close right
// after it closed the hypervisor, before it waits for the hooks of the
// tagged tasks that completed.
func WithOnClosing(f func()) Option { return func(c *config) { c.onClosing = f } }

// WithOnExecuted is a test seam: f is called on entry to TaskExecuted,
// after the worker completed the task.
func WithOnExecuted(f func(*scheduler.Task)) Option {
	return func(c *config) { c.onExecuted = f }
}
