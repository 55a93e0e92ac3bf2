package clitest_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/pzgo/pz/examples/internal/clitest"
)

// TestMain makes this test binary the program under test when Args
// starts it: a program that takes -n and no other argument.
func TestMain(m *testing.M) { clitest.Main(m, fakeMain) }

// fakeMain is the program: "-n N" and nothing else; -mute is refused
// without a word, -loud prints to stdout before refusing, and -zero
// exits 0 on a bad argument.
func fakeMain() {
	fs := flag.NewFlagSet("fake", flag.ContinueOnError)
	n := fs.Int("n", 1, "ranks")
	mute := fs.Bool("mute", false, "refuse silently")
	loud := fs.Bool("loud", false, "print before refusing")
	zero := fs.Bool("zero", false, "exit 0 on bad input")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() > 0 || *n < 1 {
		switch {
		case *mute:
		case *loud:
			fmt.Println("started")
			fmt.Fprintln(os.Stderr, "fake: bad arguments")
		default:
			fmt.Fprintf(os.Stderr, "fake: arguments not understood: %s\n", strings.Join(fs.Args(), " "))
		}
		if *zero {
			os.Exit(0)
		}
		os.Exit(2)
	}
	fmt.Println("ran with", *n)
}

// A program that refuses its bad command lines as it should passes.
func TestArgsPasses(t *testing.T) {
	clitest.Args(t,
		clitest.Case{Args: []string{"extra"}, Want: "arguments not understood: extra"},
		clitest.Case{Args: []string{"-n", "0"}, Want: "arguments not understood"},
		clitest.Case{Args: []string{"-nope"}, Want: "flag provided but not defined: -nope"},
	)
}

// recorder is a clitest.T that keeps the failures instead of failing.
type recorder struct {
	ctx  context.Context
	errs []string
}

func (r *recorder) Helper()                  {}
func (r *recorder) Context() context.Context { return r.ctx }
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// Each way a program can mishandle a bad command line fails Args, with
// a message that says which: the wrong exit status (here 0, and 0 for a
// command line the program accepts), the wrong words on stderr, output
// printed as if it ran.
func TestArgsFails(t *testing.T) {
	for _, c := range []struct {
		name string
		c    clitest.Case
		want []string
	}{
		{"exit 0", clitest.Case{Args: []string{"-zero", "extra"}, Want: "not understood"}, []string{"want exit status 2"}},
		{"accepted", clitest.Case{Args: []string{"-n", "3"}, Want: "not understood"}, []string{"want exit status 2", "want it to contain", `printed "ran with 3\n"`}},
		{"silent", clitest.Case{Args: []string{"-mute", "extra"}, Want: "not understood"}, []string{`stderr "", want it to contain "not understood"`}},
		{"printed", clitest.Case{Args: []string{"-loud", "extra"}, Want: "bad arguments"}, []string{`printed "started\n", want nothing`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{ctx: t.Context()}
			clitest.Args(r, c.c)
			if len(r.errs) != len(c.want) {
				t.Fatalf("Args reported %q, want %d failures", r.errs, len(c.want))
			}
			for i, w := range c.want {
				if !strings.Contains(r.errs[i], w) {
					t.Errorf("failure %d: %q, want it to contain %q", i, r.errs[i], w)
				}
			}
		})
	}
}
