package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"
)

// redrawEvery bounds how often the bar is redrawn.
const redrawEvery = 100 * time.Millisecond

// width is the number of cells of the bar itself.
const width = 30

// A Bar shows how much of a known amount of work is done. Its methods are
// safe for concurrent use.
type Bar struct {
	w       io.Writer // nil when disabled
	label   string
	total   int64
	done    atomic.Int64
	start   time.Time
	mu      sync.Mutex // serializes drawing
	last    time.Time
	closed  bool
	nowFunc func() time.Time
}

// New returns a bar for total units of work labelled label. The bar draws on
// w only if w is a terminal (an *os.File for which term.IsTerminal holds);
// otherwise every method is a cheap no-op.
func New(w io.Writer, label string, total int) *Bar {
	b := &Bar{label: label, total: int64(total), start: time.Now(), nowFunc: time.Now}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		b.w = w
	}
	return b
}

// NewForced returns a bar that draws on w whether or not it is a terminal,
// with the given clock; for tests and for callers that know better.
func NewForced(w io.Writer, label string, total int, now func() time.Time) *Bar {
	return &Bar{w: w, label: label, total: int64(total), start: now(), nowFunc: now}
}

// Enabled reports whether the bar draws anything.
func (b *Bar) Enabled() bool { return b.w != nil }

// Add records n more units done and redraws if enough time has passed.
func (b *Bar) Add(n int) {
	d := b.done.Add(int64(n))
	if b.w == nil {
		return
	}
	now := b.nowFunc()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || (now.Sub(b.last) < redrawEvery && d < b.total) {
		return
	}
	b.last = now
	b.draw(d, now)
}

// Done draws the final state and ends the line. Later calls do nothing.
func (b *Bar) Done() {
	if b.w == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	b.draw(b.done.Load(), b.nowFunc())
	fmt.Fprint(b.w, "\n")
}

func (b *Bar) draw(d int64, now time.Time) {
	frac := 1.0
	if b.total > 0 {
		frac = min(float64(d)/float64(b.total), 1)
	}
	cells := int(frac * width)
	elapsed := now.Sub(b.start).Round(100 * time.Millisecond)
	eta := ""
	if frac > 0 && frac < 1 {
		left := time.Duration(float64(now.Sub(b.start)) * (1 - frac) / frac).Round(time.Second)
		eta = fmt.Sprintf(" eta %s", left)
	}
	fmt.Fprintf(b.w, "\r%s [%s%s] %3.0f%% %d/%d %s%s\x1b[K",
		b.label, strings.Repeat("=", cells), strings.Repeat(" ", width-cells),
		frac*100, d, b.total, elapsed, eta)
}
