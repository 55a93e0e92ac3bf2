package comm

import (
	"fmt"
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
