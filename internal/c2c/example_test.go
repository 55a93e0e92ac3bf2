package c2c_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/pzgo/pz/internal/c2c"
)

// A benchmark samples the core-to-core round trip before its timed
// rounds and records it beside its figures (Sample's budget is 20 ms; a
// sample the machine was too busy for, ErrBusy, is skipped). The budget
// here is generous: 5,000 trips take well under a second even on a
// loaded machine.
func ExampleRoundTrip() {
	d, err := c2c.RoundTrip(5000, time.Minute)
	if errors.Is(err, c2c.ErrOneCore) {
		fmt.Println("a round trip takes time: true") // one core: nothing to measure
		return
	}
	fmt.Println("a round trip takes time:", err == nil && d > 0)
	// Output: a round trip takes time: true
}
