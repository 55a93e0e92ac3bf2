package static

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBoardSkipHistory: a dependent running a period or more behind asks
// about a frame older than the dependency's done word; the answer is that
// frame's, not the latest one's. (The done word alone once said "skipped"
// for a frame that ran, because the frame after it was skipped: a loaded
// run of TestOverrunFrameSkip skipped `after` in a frame where nothing it
// depends on skipped.)
func TestBoardSkipHistory(t *testing.T) {
	for _, shared := range []bool{false, true} {
		b := newBoard(2, 1)
		if shared {
			var err error
			b, err = createBoardFile(filepath.Join(t.TempDir(), "board"), 2, 1)
			require.NoError(t, err)
			t.Cleanup(b.close)
		}
		done, _ := b.frameDone(0, 0)
		assert.False(t, done, "nothing ended yet")

		b.finish(0, 0, false)
		b.finish(0, 1, true)
		b.finish(0, 2, false)
		b.finish(0, 3, true)
		for seq, want := range []bool{false, true, false, true} {
			done, skipped := b.frameDone(0, int64(seq))
			assert.True(t, done, "frame %d", seq)
			assert.Equal(t, want, skipped, "shared=%v, frame %d", shared, seq)
		}
		done, _ = b.frameDone(0, 4)
		assert.False(t, done)
		done, _ = b.frameDone(1, 0)
		assert.False(t, done, "the other runnable's words are its own")

		// A frame's bit is rewritten 64 frames later; within the window
		// the history answers, beyond it the latest frame does.
		for seq := int64(4); seq < 200; seq++ {
			b.finish(0, seq, seq%3 == 0)
		}
		for seq := int64(200 - skipWindow); seq < 200; seq++ {
			_, skipped := b.frameDone(0, seq)
			assert.Equal(t, seq%3 == 0, skipped, "frame %d", seq)
		}
		_, skipped := b.frameDone(0, 10)
		assert.Equal(t, 199%3 == 0, skipped, "beyond the window: the latest frame's")
	}
}
