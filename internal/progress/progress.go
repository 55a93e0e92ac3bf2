package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// RedrawEvery bounds how often a bar from New is redrawn; the last unit of
// work always draws.
const RedrawEvery = 100 * time.Millisecond

// width is the number of cells of the bar itself.
const width = 30

// A Bar shows how much of a known amount of work is done, drawn by
// github.com/schollz/progressbar/v3. Its methods are safe for concurrent
// use. A disabled bar (see New) does nothing; so does a nil *Bar.
type Bar struct {
	bar     *progressbar.ProgressBar // nil when disabled
	w       io.Writer
	endLine sync.Once // the newline after the bar, written once
}

// New returns a bar for total units of work labelled label. The bar draws on
// w only if w is a terminal (an *os.File for which term.IsTerminal holds)
// and total is positive; otherwise every method is a cheap no-op.
func New(w io.Writer, label string, total int) *Bar {
	if f, ok := w.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		return &Bar{}
	}
	return NewForced(w, label, total, RedrawEvery)
}

// NewForced returns a bar that draws on w whether or not it is a terminal,
// redrawn at most every redrawEvery (0: on every Add); for tests and for
// callers that know better. A total below 1 gives a disabled bar.
func NewForced(w io.Writer, label string, total int, redrawEvery time.Duration) *Bar {
	if total < 1 {
		return &Bar{}
	}
	b := &Bar{w: w}
	b.bar = progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(label),
		progressbar.OptionSetWidth(width),
		progressbar.OptionSetTheme(progressbar.ThemeASCII),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(redrawEvery),
		// The library calls this under its lock when the bar completes
		// and from Exit (Done): the line ends once either way.
		progressbar.OptionOnCompletion(b.finishLine),
	)
	return b
}

// Enabled reports whether the bar draws anything.
func (b *Bar) Enabled() bool { return b != nil && b.bar != nil }

// Add records n more units done and redraws if enough time has passed
// since the last drawing, or if the work is complete. Write errors are
// ignored: progress is decoration.
func (b *Bar) Add(n int) {
	if !b.Enabled() {
		return
	}
	_ = b.bar.Add(n)
}

// Done ends the bar's line, leaving the last state drawn; the bar draws
// nothing after it. Later calls do nothing.
func (b *Bar) Done() {
	if !b.Enabled() {
		return
	}
	if !b.bar.IsStarted() {
		b.endLine.Do(func() {}) // nothing drawn: no line to end
	}
	_ = b.bar.Exit()
}

func (b *Bar) finishLine() {
	b.endLine.Do(func() { fmt.Fprint(b.w, "\n") })
}
