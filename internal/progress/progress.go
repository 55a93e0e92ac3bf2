package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// RedrawEvery bounds how often a bar from New is redrawn; the last unit of
// work always draws.
const RedrawEvery = 100 * time.Millisecond

// LogEvery is how often a bar from New on a file that is not a terminal
// (a pipe, as under mpirun or in CI; a log file) writes a line of
// progress: a run shorter than that prints nothing.
const LogEvery = 10 * time.Second

// width is the number of cells of the bar itself.
const width = 30

// A Bar shows how much of a known amount of work is done, drawn by
// github.com/schollz/progressbar/v3. Its methods are safe for concurrent
// use. A disabled bar (see New) does nothing; so does a nil *Bar.
type Bar struct {
	bar     *progressbar.ProgressBar // nil when disabled or writing lines
	lines   *lineLog                 // non-nil when writing lines
	w       io.Writer
	endLine sync.Once // the newline after the bar, written once
}

// New returns a bar for total units of work labelled label. On a terminal
// (an *os.File for which term.IsTerminal holds) it draws a bar; on
// another file (a pipe, a log file) it writes a line every LogEvery once
// the work has lasted that long, and a last one when it ends (NewLines);
// on any other writer, or when total is not positive, every method is a
// cheap no-op.
func New(w io.Writer, label string, total int) *Bar {
	f, ok := w.(*os.File)
	switch {
	case !ok:
		return &Bar{}
	case !term.IsTerminal(int(f.Fd())):
		return NewLines(w, label, total, LogEvery)
	}
	return NewForced(w, label, total, RedrawEvery)
}

// NewLines returns a bar that writes its progress as lines for logs:
// "label: 540/1200 (45%) after 12s, about 15s left", at most one every
// every, the first once every has passed since NewLines, and, if it wrote
// any, a last one from Done ("label: 1200/1200 (100%) in 27s"). A total
// below 1 gives a disabled bar.
func NewLines(w io.Writer, label string, total int, every time.Duration) *Bar {
	if total < 1 {
		return &Bar{}
	}
	l := &lineLog{w: w, label: label, total: int64(total), every: every, start: time.Now()}
	if every <= 0 {
		l.due.Store(true) // a line on every Add
	} else {
		l.timer = time.AfterFunc(every, l.setDue)
	}
	return &Bar{lines: l, w: w}
}

// lineLog is a Bar that writes lines. Add reads no clock: a timer marks
// a line due once every has passed since the last line (or since
// NewLines), and the first Add that sees the mark writes it. A pending
// timer is no goroutine, and end stops it: an abandoned bar's timer
// fires once, and nothing arms it again.
type lineLog struct {
	w     io.Writer
	label string
	total int64
	every time.Duration
	start time.Time
	done  atomic.Int64
	due   atomic.Bool // a line is due: set by timer (or always, every <= 0), cleared when written
	mu    sync.Mutex  // one line at a time; guards timer, wrote and ended
	timer *time.Timer // marks the next line due; nil when every <= 0
	wrote bool
	ended bool
}

func (l *lineLog) setDue() { l.due.Store(true) }

func (l *lineLog) add(n int) {
	d := l.done.Add(int64(n))
	if !l.due.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended || !l.due.Load() {
		return
	}
	el := time.Since(l.start)
	if l.timer != nil {
		l.due.Store(false)
		l.timer.Reset(l.every) // fired: Reset arms it afresh
	}
	l.wrote = true
	left := ""
	if d > 0 && d < l.total {
		left = fmt.Sprintf(", about %v left", (el * time.Duration(l.total-d) / time.Duration(d)).Round(time.Second))
	}
	fmt.Fprintf(l.w, "%s: %d/%d (%d%%) after %v%s\n", l.label, d, l.total, 100*d/l.total, el.Round(time.Second), left)
}

func (l *lineLog) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	l.ended = true
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.wrote {
		d := l.done.Load()
		fmt.Fprintf(l.w, "%s: %d/%d (%d%%) in %v\n", l.label, d, l.total, 100*d/l.total, time.Since(l.start).Round(time.Second))
	}
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

// Enabled reports whether the bar draws anything: a bar, or lines.
func (b *Bar) Enabled() bool { return b != nil && (b.bar != nil || b.lines != nil) }

// Add records n more units done and redraws if enough time has passed
// since the last drawing, or if the work is complete. Write errors are
// ignored: progress is decoration.
func (b *Bar) Add(n int) {
	switch {
	case !b.Enabled():
	case b.lines != nil:
		b.lines.add(n)
	default:
		_ = b.bar.Add(n)
	}
}

// Done ends the bar's line, leaving the last state drawn; the bar draws
// nothing after it. Later calls do nothing.
func (b *Bar) Done() {
	if !b.Enabled() {
		return
	}
	if b.lines != nil {
		b.lines.end()
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
