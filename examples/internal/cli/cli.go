// Package cli is the command line the example programs share: their
// flags parsed, and arguments left over refused as a usage error.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// NoArgs is what an example that takes no arguments says it takes.
const NoArgs = "it takes none; PZ_RANKS=N sets the in-process ranks"

// Check returns the usage error of program name for the arguments left
// after its flags, args, or nil when none are left; takes says what it
// takes instead.
func Check(name, takes string, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return errors.New(name + ": arguments not understood: " + strings.Join(args, " ") + " (" + takes + ")")
}

// Parse parses the command line's flags and exits with status 2, saying
// why on stderr, when arguments are left (see Check).
func Parse(name, takes string) {
	flag.Parse()
	if err := Check(name, takes, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
