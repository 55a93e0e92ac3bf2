package static

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// sortedPrev is the run before each row on its resource by the rule
// newBlamer used to apply to every row: all rows of a resource sorted
// (stably, in runnable then row order) by planned start.
func sortedPrev(r *Run) [][]rowRef {
	prev := make([][]rowRef, len(r.Runnables))
	type key struct{ client, resource string }
	on := map[key][]rowRef{}
	for ri, rr := range r.Runnables {
		prev[ri] = make([]rowRef, len(rr.Seq))
		for i := range rr.Seq {
			k := key{rr.Client, rr.Resource}
			on[k] = append(on[k], rowRef{ri, i})
		}
	}
	for _, rows := range on {
		slices.SortStableFunc(rows, func(x, y rowRef) int {
			return cmp.Compare(r.Runnables[x.r].Planned[x.i], r.Runnables[y.r].Planned[y.i])
		})
		last := noRow()
		for _, x := range rows {
			prev[x.r][x.i], last = last, x
		}
	}
	return prev
}

// The blamer finds the run before each row on its resource by merging
// the runnables' rows (in frame order) rather than sorting every row: it
// must give what sorting gives, ties of planned starts included (in
// runnable order), with runnables on several resources and clients, one
// with no rows, and a record written by hand whose rows are out of
// order (sorted as before).
func TestBlamerRunBeforeOnResource(t *testing.T) {
	row := func(name, client, resource string, planned ...int64) RunnableRun {
		rr := RunnableRun{Name: name, Client: client, Resource: resource}
		for i, p := range planned {
			rr.Seq = append(rr.Seq, int64(i))
			rr.Planned = append(rr.Planned, p)
		}
		return rr
	}
	for _, c := range []struct {
		name string
		run  []RunnableRun
	}{
		{"interleaved with ties", []RunnableRun{
			row("a", "x", "cpu0", 0, 10, 20, 30),
			row("b", "x", "cpu0", 5, 10, 25, 30),
			row("c", "y", "cpu0", 0, 10, 20, 30), // another client's thread
			row("d", "x", "cpu1", 1, 11, 21),
			row("e", "x", "cpu0", 0, 12, 30, 31),
			row("f", "x", "cpu0"),
		}},
		{"one runnable", []RunnableRun{row("a", "x", "cpu0", 0, 10, 20)}},
		{"out of order", []RunnableRun{
			row("a", "x", "cpu0", 20, 0, 10),
			row("b", "x", "cpu0", 5, 15, 25),
		}},
		{"many", func() []RunnableRun {
			var rs []RunnableRun
			for k := 0; k < 9; k++ {
				var p []int64
				for f := int64(0); f < 50; f++ {
					p = append(p, f*100+int64(k*37%100)/10*10)
				}
				rs = append(rs, row(fmt.Sprintf("r%d", k), "x", fmt.Sprintf("cpu%d", k%2), p...))
			}
			return rs
		}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Run{Runnables: c.run}
			assert.Equal(t, sortedPrev(r), newBlamer(r).prev)
		})
	}
}
