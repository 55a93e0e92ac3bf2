package clitest_test

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/examples/internal/clitest"
)

// An example program's main_test.go makes its test binary double as the
// program and starts it with command lines it must refuse:
//
//	func TestMain(m *testing.M) { clitest.Main(m, main) }
//
//	func TestArgs(t *testing.T) {
//		clitest.Args(t, clitest.Case{Args: []string{"extra"}, Want: "arguments not understood: extra"})
//	}
//
// Here this package's own test binary is the program (fakeMain in
// clitest_test.go, which takes -n N and nothing else), and a recorder
// stands for the *testing.T: a command line the program refuses passes,
// one it runs is reported.
func Example() {
	r := &recorder{ctx: context.Background()}
	clitest.Args(r, clitest.Case{Args: []string{"extra"}, Want: "arguments not understood: extra"})
	fmt.Println("refused as it should be:", len(r.errs) == 0)

	clitest.Args(r, clitest.Case{Args: []string{"-n", "3"}, Want: "arguments not understood"})
	for _, e := range r.errs {
		fmt.Println(e)
	}
	// Output:
	// refused as it should be: true
	// ["-n" "3"]: <nil>, want exit status 2; stderr ""
	// ["-n" "3"]: stderr "", want it to contain "arguments not understood"
	// ["-n" "3"]: printed "ran with 3\n", want nothing (it did not run)
}
