package clitest_test

import (
	"testing"

	"github.com/pzgo/pz/examples/internal/clitest"
)

// An example program's main_test.go: the test binary doubles as the
// program (Main), and Args starts it with command lines it must refuse.
// This package's own TestMain does the same with a small program of its
// own (clitest_test.go).
func Example() {
	// func TestMain(m *testing.M) { clitest.Main(m, main) }
	//
	// func TestArgs(t *testing.T) {
	//	clitest.Args(t, clitest.Case{Args: []string{"extra"}, Want: "arguments not understood: extra"})
	// }
	var _ func(*testing.M, func()) = clitest.Main
	var _ func(clitest.T, ...clitest.Case) = clitest.Args
}
