package main

import (
	"testing"

	"github.com/pzgo/pz/examples/internal/clitest"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

// TestArgs checks that camera refuses arguments it does not take with
// status 2 and a message, before it waits for a master: an argument
// left over (a schedule or a run record, say) and an unknown flag.
func TestArgs(t *testing.T) {
	clitest.Args(t,
		clitest.Case{Args: []string{"run.json"}, Want: "camera: arguments not understood: run.json (it takes only the flag -dir)"},
		clitest.Case{Args: []string{"-dir", t.TempDir(), "extra"}, Want: "camera: arguments not understood: extra"},
		clitest.Case{Args: []string{"-frames", "10"}, Want: "flag provided but not defined: -frames"},
	)
}
