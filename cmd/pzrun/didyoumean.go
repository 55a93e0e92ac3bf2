package main

import (
	"fmt"
	"sort"
)

// unknownApp is pzrun's message for an app name it does not know: the
// apps, after the closest name when name looks like a misspelling of it
// (pzrun helo: did you mean "hello"?).
func unknownApp(name string) string {
	if hint := closestApp(name); hint != "" {
		return fmt.Sprintf("unknown app %q; did you mean %q? The apps are: %s", name, hint, appNames())
	}
	return fmt.Sprintf("unknown app %q; the apps are: %s", name, appNames())
}

// closestApp returns the app name nearest to name in edit distance, when
// it is at most 2 edits away and less than half of name; "" otherwise.
func closestApp(name string) string {
	names := []string{"stm"}
	for _, a := range apps() {
		names = append(names, a.name)
	}
	sort.Strings(names)
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(name, n); d < bestD && 2*d < len([]rune(name)) {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
