package comm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// FormatRanks names ranks (ascending, as a message lists them) in ranges:
// "rank 3", "ranks 0, 2", "ranks 0-2, 5, 7-1023 (1022 ranks)", at most
// eight ranges then "...", so that an error naming ranks stays one short
// line at any rank count (a list of every rank made each rank's error as
// long as the job, and the job's joined errors quadratic: 4.3 MB of text
// after Ctrl-C at 1,024 ranks).
func FormatRanks(rs []int) string {
	if len(rs) == 1 {
		return fmt.Sprintf("rank %d", rs[0])
	}
	const most = 8
	var b strings.Builder
	b.WriteString("ranks ")
	n := 0
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if n == most {
			b.WriteString(", ...")
			break
		}
		if n > 0 {
			b.WriteString(", ")
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", rs[i], rs[j])
		} else {
			fmt.Fprintf(&b, "%d", rs[i])
		}
		n++
		i = j + 1
	}
	if len(rs) > 2 {
		fmt.Fprintf(&b, " (%d ranks)", len(rs))
	}
	return b.String()
}

// RankErrors is the failure of a run of several ranks in one process
// (comm/local.Run, runtimeview.RunLocal): one *RankError per failed rank,
// the cause first and the others, mostly its consequences, after it in
// rank order. errors.Is and errors.As look into every one (Unwrap), and
// a loop over the slice gives each rank's error in full.
//
// Error groups the ranks that failed alike, so that a thousand ranks
// broken by one rank's failure read as two lines, not a thousand:
//
//	rank 5: boom
//	ranks R = 0-4, 6-63 (63 ranks): local: Barrier on rank R: comm: communicator broken: rank 5 failed: boom
//
// Messages that differ only by the rank's own number ("on rank 7") are
// alike; R stands for it. Messages the same to the letter on several
// ranks (a mismatch that lists every rank's argument: "root: rank 0 has
// 0, rank 1 has 1") are alike as they are. Panics (*PanicError) are alike
// when they differ only by their stacks: the group shows its first rank's
// stack once, labelled with its number. At most maxGroups kinds are
// listed, then how many ranks failed otherwise.
type RankErrors []*RankError

// maxGroups is how many kinds of failure RankErrors.Error lists.
const maxGroups = 6

// Error lists the ranks' failures, alike ones once (see RankErrors).
func (es RankErrors) Error() string {
	type group struct {
		msg   string // the message, R for the rank's own number
		first string // the first rank's message as it is
		own   bool   // msg has R for the rank's own number
		stack string // the first rank's panic stacks, with its number
		ranks []int
	}
	// A panic's message carries its goroutine's stack, different on
	// every rank: ranks that panicked alike are grouped by the message
	// without it, and the group shows its first rank's stack once.
	msgOf := func(e *RankError) string {
		if e.Err == nil {
			return "<nil>"
		}
		msg, _ := withoutStacks(e.Err)
		return msg
	}
	// A message several ranks share to the letter groups them as it is,
	// even where it names one of them ("rank 0 has 0" on rank 0).
	same := map[string]int{}
	for _, e := range es {
		if e != nil {
			same[msgOf(e)]++
		}
	}
	var groups []*group
	byMsg := map[string]*group{}
	for _, e := range es {
		if e == nil {
			continue
		}
		msg := msgOf(e)
		key := msg
		if same[msg] == 1 {
			key = ownRankAsR(msg, e.Rank)
		}
		g := byMsg[key]
		if g == nil {
			g = &group{msg: key, first: msg, own: key != msg}
			if e.Err != nil {
				_, stacks := withoutStacks(e.Err)
				g.first = strings.TrimRight(e.Err.Error(), "\n")
				g.stack = strings.ReplaceAll(stacks, "\nstacktrace:\n", fmt.Sprintf("\nstacktrace (rank %d):\n", e.Rank))
			}
			byMsg[key] = g
			groups = append(groups, g)
		}
		g.ranks = append(g.ranks, e.Rank)
	}
	var b strings.Builder
	for i, g := range groups {
		if i == maxGroups {
			var rest []int
			for _, g := range groups[i:] {
				rest = append(rest, g.ranks...)
			}
			slices.Sort(rest)
			fmt.Fprintf(&b, "\n(and %s, failed in %d other ways)", FormatRanks(rest), len(groups)-i)
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		switch {
		case len(g.ranks) == 1:
			fmt.Fprintf(&b, "rank %d: %s", g.ranks[0], g.first)
		case g.own:
			slices.Sort(g.ranks)
			fmt.Fprintf(&b, "ranks R = %s: %s%s", strings.TrimPrefix(FormatRanks(g.ranks), "ranks "), g.msg, g.stack)
		default:
			slices.Sort(g.ranks)
			fmt.Fprintf(&b, "%s: %s%s", FormatRanks(g.ranks), g.msg, g.stack)
		}
	}
	return b.String()
}

// withoutStacks returns err's message without the stacks of the panics
// (*PanicError) in its tree, and those stacks as they stood in it.
func withoutStacks(err error) (msg, stacks string) {
	msg = err.Error()
	var walk func(error)
	walk = func(e error) {
		if pe, ok := e.(*PanicError); ok && pe != nil {
			s := pe.Error()
			if i := strings.Index(s, "\nstacktrace:\n"); i >= 0 {
				sec := strings.TrimRight(s[i:], "\n")
				if strings.Contains(msg, sec) {
					msg = strings.Replace(msg, sec, "", 1)
					stacks += sec
				}
			}
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			if w := u.Unwrap(); w != nil {
				walk(w)
			}
		case interface{ Unwrap() []error }:
			for _, w := range u.Unwrap() {
				if w != nil {
					walk(w)
				}
			}
		}
	}
	walk(err)
	if stacks != "" {
		msg = strings.TrimRight(msg, "\n")
	}
	return msg, stacks
}

// Unwrap returns the ranks' errors, for errors.Is and errors.As.
func (es RankErrors) Unwrap() []error {
	out := make([]error, 0, len(es))
	for _, e := range es {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// ownRankAsR is msg with "rank N", N being the failed rank's own number,
// written "rank R", where it stands as a word ("rank 7:" but not "rank
// 70" or "crank 7").
func ownRankAsR(msg string, rank int) string {
	word := "rank " + strconv.Itoa(rank)
	if !strings.Contains(msg, word) {
		return msg
	}
	var b strings.Builder
	for {
		i := strings.Index(msg, word)
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		end := i + len(word)
		whole := (i == 0 || !isWordByte(msg[i-1])) && (end == len(msg) || !isDigit(msg[end]))
		b.WriteString(msg[:i])
		if whole {
			b.WriteString("rank R")
		} else {
			b.WriteString(word)
		}
		msg = msg[end:]
	}
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isWordByte(c byte) bool {
	return isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
}
