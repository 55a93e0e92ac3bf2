package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestBarDrawsAndThrottles(t *testing.T) {
	var buf bytes.Buffer
	clk := &fakeClock{t: time.Unix(0, 0)}
	b := NewForced(&buf, "cholesky", 10, clk.now)
	require.True(t, b.Enabled())

	clk.t = clk.t.Add(time.Second)
	b.Add(5)
	first := buf.String()
	assert.Contains(t, first, "cholesky [===============               ]  50% 5/10")
	assert.Contains(t, first, "eta 1s")

	// Within the redraw interval nothing is drawn.
	clk.t = clk.t.Add(10 * time.Millisecond)
	b.Add(1)
	assert.Equal(t, first, buf.String())

	// Completion always draws, and Done ends the line once.
	b.Add(4)
	assert.Contains(t, buf.String(), "100% 10/10")
	b.Done()
	b.Done()
	assert.Equal(t, 1, strings.Count(buf.String(), "\n"))
}

func TestBarSilentOnNonTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	defer f.Close()
	b := New(f, "x", 3)
	assert.False(t, b.Enabled())
	b.Add(3)
	b.Done()
	st, err := f.Stat()
	require.NoError(t, err)
	assert.Zero(t, st.Size(), "a bar on a regular file must print nothing")

	var buf bytes.Buffer
	New(&buf, "x", 3).Add(1)
	assert.Zero(t, buf.Len(), "a bar on a non-file writer must print nothing")
}
