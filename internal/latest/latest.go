// Package latest keeps the latest entries of a log that a long run would
// otherwise grow without bound (the scheduler's and the hypervisor's
// resize logs), and counts every entry ever appended.
package latest

import "slices"

// A Log keeps the latest Keep entries appended to it, or every entry
// when Keep is 0, and counts them all. Trimming is amortized O(1): the
// oldest entries go once the log holds twice Keep. A Log is not safe for
// concurrent use; its owner holds a lock around it.
type Log[T any] struct {
	keep    int
	entries []T
	total   int
}

// New returns a log that keeps the latest keep entries (0: every one).
func New[T any](keep int) Log[T] { return Log[T]{keep: max(keep, 0)} }

// Append adds vs, in order, and drops the oldest entries past twice the
// log's limit.
func (l *Log[T]) Append(vs ...T) {
	l.entries = append(l.entries, vs...)
	l.total += len(vs)
	if n := len(l.entries); l.keep > 0 && n > 2*l.keep {
		kept := copy(l.entries, l.entries[n-l.keep:])
		clear(l.entries[kept:]) // what they referenced, for the collector
		l.entries = l.entries[:kept]
	}
}

// Latest returns a copy of the latest entries, oldest first: at most the
// log's limit, or all of them.
func (l *Log[T]) Latest() []T {
	rs := l.entries
	if l.keep > 0 && len(rs) > l.keep {
		rs = rs[len(rs)-l.keep:]
	}
	return slices.Clone(rs)
}

// Total returns how many entries were ever appended.
func (l *Log[T]) Total() int { return l.total }
