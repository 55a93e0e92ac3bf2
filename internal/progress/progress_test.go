package progress

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/internal/lockedbuf"
)

func TestBarDraws(t *testing.T) {
	var buf bytes.Buffer
	b := NewForced(&buf, "cholesky", 10, 0)
	require.True(t, b.Enabled())

	b.Add(5)
	assert.Contains(t, buf.String(), "cholesky  50% [==============>...............] (5/10)")
	b.Add(5)
	assert.Contains(t, buf.String(), "cholesky 100% [==============================] (10/10)")
	assert.True(t, strings.HasSuffix(buf.String(), "\n"), "completion ends the line: %q", buf.String())

	// Done after completion does not end the line again, nor draw.
	n := buf.Len()
	b.Done()
	b.Done()
	b.Add(1)
	assert.Equal(t, n, buf.Len())
	assert.Equal(t, 1, strings.Count(buf.String(), "\n"))
}

// With a redraw interval longer than the test, only the first state and
// the completed one draw: the throttle does not depend on how fast the
// test runs.
func TestBarThrottles(t *testing.T) {
	var buf bytes.Buffer
	b := NewForced(&buf, "gemm", 10, time.Hour)
	b.Add(5)
	first := buf.String()
	assert.Contains(t, first, "(5/10)")
	b.Add(1)
	assert.Equal(t, first, buf.String(), "within the redraw interval nothing is drawn")
	b.Add(4)
	assert.Contains(t, buf.String(), "(10/10)", "completion always draws")
	b.Done()
	assert.Equal(t, 1, strings.Count(buf.String(), "\n"))
}

// Done before completion ends the line once, and the bar stays silent.
func TestBarDoneEarly(t *testing.T) {
	var buf bytes.Buffer
	b := NewForced(&buf, "x", 10, 0)
	b.Add(3)
	b.Done()
	b.Done()
	out := buf.String()
	assert.Contains(t, out, "(3/10)")
	assert.True(t, strings.HasSuffix(out, "\n"), "%q", out)
	b.Add(7)
	assert.Equal(t, out, buf.String(), "nothing after Done")

	// A bar that never drew leaves no empty line.
	var quiet bytes.Buffer
	NewForced(&quiet, "y", 10, 0).Done()
	assert.Zero(t, quiet.Len())
}

func TestBarConcurrentAdds(t *testing.T) {
	var buf lockedbuf.Buffer
	const goroutines, each = 8, 100
	b := NewForced(&buf, "tasks", goroutines*each, RedrawEvery)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				b.Add(1)
			}
		}()
	}
	wg.Wait()
	b.Done()
	assert.Contains(t, buf.String(), "(800/800)")
	assert.Equal(t, 1, strings.Count(buf.String(), "\n"))
}

// TestLines: a bar for logs writes a line at most every period, the
// first after one period, and a last one from Done only if it wrote any.
func TestLines(t *testing.T) {
	var buf bytes.Buffer
	b := NewLines(&buf, "tasks", 10, 0)
	b.Add(3)
	b.Add(2)
	b.Done()
	b.Add(1) // after Done: nothing
	b.Done()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3, buf.String())
	assert.Regexp(t, `^tasks: 3/10 \(30%\) after \d+s, about \d+s left$`, lines[0])
	assert.Regexp(t, `^tasks: 5/10 \(50%\) after \d+s, about \d+s left$`, lines[1])
	assert.Regexp(t, `^tasks: 5/10 \(50%\) in \d+s$`, lines[2])

	buf.Reset()
	quiet := NewLines(&buf, "tasks", 10, time.Hour)
	quiet.Add(10)
	quiet.Done()
	assert.Zero(t, buf.Len(), "no line before the first period, and so no last one")

	assert.False(t, NewLines(&buf, "tasks", 0, 0).Enabled())
}

func TestBarSilentOnNonTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	defer f.Close()
	b := New(f, "x", 3)
	assert.True(t, b.Enabled(), "a bar on a file that is not a terminal writes lines")
	b.Add(3)
	b.Done()
	st, err := f.Stat()
	require.NoError(t, err)
	assert.Zero(t, st.Size(), "a run shorter than LogEvery writes nothing")

	var buf bytes.Buffer
	New(&buf, "x", 3).Add(1)
	assert.Zero(t, buf.Len(), "a bar on a non-file writer must print nothing")

	// No work, or a nil bar: disabled, and safe to call.
	z := NewForced(&buf, "x", 0, 0)
	assert.False(t, z.Enabled())
	z.Add(1)
	z.Done()
	var nilBar *Bar
	nilBar.Add(1)
	nilBar.Done()
	assert.Zero(t, buf.Len())
}

// BenchmarkAdd is the cost of Add in a task callback: on a drawing bar
// (throttled to RedrawEvery) and on a disabled one.
func BenchmarkAdd(b *testing.B) {
	b.Run("drawing", func(b *testing.B) {
		bar := NewForced(discard{}, "bench", b.N+1, RedrawEvery)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bar.Add(1)
			}
		})
	})
	b.Run("lines", func(b *testing.B) {
		// A bar for logs (a pipe, under mpirun), before its first line.
		bar := NewLines(discard{}, "bench", b.N+1, LogEvery)
		defer bar.Done()
		for range b.N {
			bar.Add(1)
		}
	})
	b.Run("lines-parallel", func(b *testing.B) {
		bar := NewLines(discard{}, "bench", b.N+1, LogEvery)
		defer bar.Done()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bar.Add(1)
			}
		})
	})
	b.Run("disabled", func(b *testing.B) {
		bar := New(discard{}, "bench", b.N+1)
		for range b.N {
			bar.Add(1)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestLinesPeriod: a bar for logs writes its first line once its period
// has passed since NewLines, and the next no sooner than a period after
// that line; Add reads no clock (a timer marks the line due).
func TestLinesPeriod(t *testing.T) {
	const every = 30 * time.Millisecond
	var buf lockedbuf.Buffer
	begin := time.Now()
	b := NewLines(&buf, "tasks", 1<<30, every)
	defer b.Done()
	deadline := time.Now().Add(testWait)
	var t0 time.Time // before the Add that wrote the first line
	for buf.String() == "" {
		require.True(t, time.Now().Before(deadline), "no line %v after NewLines with a period of %v", testWait, every)
		t0 = time.Now()
		b.Add(1)
		runtime.Gosched()
	}
	require.GreaterOrEqual(t, time.Since(begin), every, "the first line came before its period")
	first := buf.String()
	assert.Regexp(t, `^tasks: \d+/1073741824 \(0%\) after \d+s, about [\dhms]+ left\n$`, first)
	b.Add(1)
	if time.Since(t0) < every { // else the next line may be due already
		assert.Equal(t, first, buf.String(), "a second line within a period of the first")
	}
	// The next line comes when its period has passed.
	for strings.Count(buf.String(), "\n") < 2 {
		require.True(t, time.Now().Before(deadline), "no second line %v after the first, period %v", testWait, every)
		b.Add(1)
		runtime.Gosched()
	}
	require.GreaterOrEqual(t, time.Since(t0), every)
	b.Done()
	assert.Regexp(t, `\ntasks: \d+/1073741824 \(0%\) in \d+s\n$`, buf.String())
}

// TestLinesNoGoroutines: a bar for logs holds no goroutine while it waits
// for its period (a pending timer, which Done stops), so a bar that is
// never ended leaks none either.
func TestLinesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	bars := make([]*Bar, 100)
	for i := range bars {
		bars[i] = NewLines(discard{}, "tasks", 10, time.Hour)
		bars[i].Add(1)
	}
	assert.Less(t, runtime.NumGoroutine()-before, len(bars)/2, "a goroutine per bar")
	for _, b := range bars {
		b.Done()
		assert.False(t, b.lines.timer.Stop(), "Done left the bar's timer armed")
	}
}

// testWait bounds the waits for a line in the tests.
const testWait = 30 * time.Second
