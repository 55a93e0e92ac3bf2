package gantt

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCriticalPath(t *testing.T) {
	for _, c := range []struct {
		name string
		bars []Bar
		want []uint64
	}{
		{"empty", nil, nil},
		{"one", []Bar{{ID: 7, Start: 0, End: 5}}, []uint64{7}},
		{"diamond, longer right", []Bar{
			{ID: 1, Start: 0, End: 1},
			{ID: 2, Start: 1, End: 3, Deps: []uint64{1}},
			{ID: 3, Start: 1, End: 6, Row: 1, Deps: []uint64{1}},
			{ID: 4, Start: 6, End: 7, Deps: []uint64{2, 3}},
		}, []uint64{1, 3, 4}},
		{"an independent long task beats a chain", []Bar{
			{ID: 1, Start: 0, End: 1},
			{ID: 2, Start: 1, End: 2, Deps: []uint64{1}},
			{ID: 3, Start: 0, End: 5, Row: 1},
		}, []uint64{3}},
		{"durations, not waits: the chain wins", []Bar{
			{ID: 1, Start: 0, End: 3},
			{ID: 2, Start: 10, End: 13, Deps: []uint64{1}}, // waited 7
			{ID: 3, Start: 0, End: 5, Row: 1},
		}, []uint64{1, 2}},
		{"ties go to lower IDs", []Bar{
			{ID: 5, Start: 0, End: 2},
			{ID: 4, Start: 0, End: 2, Row: 1},
			{ID: 6, Start: 2, End: 3, Deps: []uint64{5, 4}},
			{ID: 3, Start: 0, End: 2, Row: 2},
		}, []uint64{4, 6}},
		{"a team task spans its members", []Bar{
			{ID: 1, Start: 0, End: 1},
			{ID: 2, Start: 1, End: 3, Row: 0, Deps: []uint64{1}},
			{ID: 2, Start: 2, End: 6, Row: 1, Deps: []uint64{1}}, // the team: 1..6
			{ID: 3, Start: 0, End: 5, Row: 2},
		}, []uint64{1, 2}},
		{"unknown and self dependencies are ignored", []Bar{
			{ID: 1, Start: 0, End: 1, Deps: []uint64{99, 1}},
			{ID: 2, Start: 1, End: 2, Deps: []uint64{1, 1}},
		}, []uint64{1, 2}},
		{"a successor listed before its predecessor", []Bar{
			{ID: 2, Start: 5, End: 9, Deps: []uint64{10}},
			{ID: 10, Start: 0, End: 5, Row: 1},
		}, []uint64{10, 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, CriticalPath(c.bars))
		})
	}
}

// TestCriticalPathBruteForce checks the dynamic programme against an
// enumeration of every path in small random DAGs.
func TestCriticalPathBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for it := range 300 {
		n := 1 + rng.IntN(9)
		bars := make([]Bar, n)
		for i := range bars {
			bars[i] = Bar{ID: uint64(i + 1), Start: 0, End: time.Duration(1 + rng.IntN(20))}
			for p := range i {
				if rng.IntN(3) == 0 {
					bars[i].Deps = append(bars[i].Deps, uint64(p+1))
				}
			}
		}
		dur := func(id uint64) time.Duration { return bars[id-1].End - bars[id-1].Start }
		var best time.Duration
		var walk func(id uint64, l time.Duration) // backwards from id
		walk = func(id uint64, l time.Duration) {
			l += dur(id)
			best = max(best, l)
			for _, p := range bars[id-1].Deps {
				walk(p, l)
			}
		}
		for i := range bars {
			walk(uint64(i+1), 0)
		}
		path := CriticalPath(bars)
		var got time.Duration
		for i, id := range path {
			got += dur(id)
			if i > 0 {
				assert.Contains(t, bars[id-1].Deps, path[i-1], "case %d: %v is not a path", it, path)
			}
		}
		assert.Equal(t, best, got, fmt.Sprintf("case %d: %v", it, path))
	}
}
