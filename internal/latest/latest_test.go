package latest_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/pzgo/pz/internal/latest"
)

func TestLogKeepsLatest(t *testing.T) {
	l := latest.New[int](3)
	for i := range 10 {
		l.Append(i)
		want := []int{}
		for j := max(0, i-2); j <= i; j++ {
			want = append(want, j)
		}
		assert.Equal(t, want, l.Latest(), "after %d", i)
		assert.Equal(t, i+1, l.Total())
	}
	l.Append(10, 11, 12, 13)
	assert.Equal(t, []int{11, 12, 13}, l.Latest())
	assert.Equal(t, 14, l.Total())
}

func TestLogKeepsAll(t *testing.T) {
	l := latest.New[int](0)
	for i := range 10_000 {
		l.Append(i)
	}
	got := l.Latest()
	assert.Len(t, got, 10_000)
	assert.Equal(t, 0, got[0])
	assert.Equal(t, 10_000, l.Total())
}

// TestLogBounded: a log appended to for ever holds at most twice its
// limit.
func TestLogBounded(t *testing.T) {
	l := latest.New[[]byte](4)
	for range 100_000 {
		l.Append(make([]byte, 8))
	}
	assert.Len(t, l.Latest(), 4)
}

// TestLatestIsACopy: the caller's slice is its own.
func TestLatestIsACopy(t *testing.T) {
	l := latest.New[int](2)
	l.Append(1, 2)
	got := l.Latest()
	got[0] = 99
	assert.Equal(t, []int{1, 2}, l.Latest())
}

func Example() {
	moves := latest.New[string](2)
	moves.Append("w0 a->b", "w1 a->b", "w0 b->a")
	fmt.Println(moves.Latest(), moves.Total())
	// Output: [w1 a->b w0 b->a] 3
}
