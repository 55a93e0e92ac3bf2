// Package plural writes counts of things in messages: "1 rank", "2
// ranks".
package plural

import "strconv"

// Of returns n and word, with an s unless n is 1 (for the regular nouns
// of pz's messages: rank, device, task, tile, client).
func Of(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
