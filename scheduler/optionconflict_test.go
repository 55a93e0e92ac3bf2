package scheduler_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestConflictingOption: later options agree with the first ones when
// each setting they make is the first options' (the same options, some
// of them, another order, the last of several the one that counts);
// otherwise the error names the option, its position in the later list
// and both values.
func TestConflictingOption(t *testing.T) {
	getenv := func(k string) string { return os.Getenv(k) }
	first := []scheduler.Option{
		scheduler.WithPolicy("dmda"), scheduler.WithWorkers(2), scheduler.WithStats(true),
		scheduler.WithWorkerNames(map[int]string{0: "io", 1: "net"}),
	}
	for _, tc := range []struct {
		name  string
		later []scheduler.Option
		want  string // "": they agree
	}{
		{"identical", first, ""},
		{"none", nil, ""},
		{"subset", []scheduler.Option{scheduler.WithWorkers(2)}, ""},
		{"reordered", []scheduler.Option{scheduler.WithStats(true), scheduler.WithPolicy("dmda"), scheduler.WithWorkers(2)}, ""},
		{"the last counts", []scheduler.Option{scheduler.WithWorkers(5), scheduler.WithWorkers(2)}, ""},
		// Refused as New refuses it (an Option variable left unset);
		// it was skipped, and a later runtimeview.Scheduler call got
		// the scheduler where a first call with it fails.
		{"a nil option", []scheduler.Option{scheduler.WithWorkers(2), nil}, "option 2 of the later options is nil"},
		{"names equal", []scheduler.Option{scheduler.WithWorkerNames(map[int]string{1: "net", 0: "io"})}, ""},
		{"a zero value", []scheduler.Option{scheduler.WithPolicy("dmda"), scheduler.WithStats(false)},
			`scheduler.WithStats(false) (option 2 of the later options) disagrees with the first options, which give scheduler.WithStats(true)`},
		{"workers", []scheduler.Option{scheduler.WithWorkers(3)},
			`scheduler.WithWorkers(3) (option 1 of the later options) disagrees with the first options, which give scheduler.WithWorkers(2)`},
		{"the last counts, and conflicts", []scheduler.Option{scheduler.WithWorkers(2), scheduler.WithStats(true), scheduler.WithWorkers(3)},
			`scheduler.WithWorkers(3) (option 3 of the later options) disagrees with the first options, which give scheduler.WithWorkers(2)`},
		{"policy", []scheduler.Option{scheduler.WithWorkers(2), scheduler.WithPolicy("lws")},
			`scheduler.WithPolicy("lws") (option 2 of the later options) disagrees with the first options, which give scheduler.WithPolicy("dmda")`},
		{"not given first", []scheduler.Option{scheduler.WithSpin(8)},
			`scheduler.WithSpin(8) (option 1 of the later options) disagrees with the first options, which do not give scheduler.WithSpin`},
		{"a func", []scheduler.Option{scheduler.WithGetenv(getenv)},
			`scheduler.WithGetenv(a function) (option 1 of the later options) disagrees with the first options, which do not give scheduler.WithGetenv; an option that holds a function cannot be compared`},
		{"a watchdog report", []scheduler.Option{scheduler.WithWatchdog(time.Second, func(scheduler.Stall) {})},
			`scheduler.WithWatchdog(1s, a function) (option 1 of the later options)`},
		{"names different", []scheduler.Option{scheduler.WithWorkerNames(map[int]string{0: "io", 1: "disk"})},
			`scheduler.WithWorkerNames(map[0:io 1:disk]) (option 1 of the later options) disagrees with the first options, which give scheduler.WithWorkerNames(map[0:io 1:net])`},
		{"names fewer", []scheduler.Option{scheduler.WithWorkerNames(map[int]string{0: "io"})},
			`scheduler.WithWorkerNames(map[0:io])`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := scheduler.ConflictingOption(first, tc.later)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, scheduler.ErrBadOption)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestConflictingOptionFuncs: a function the first options gave is kept
// by later options that do not give one, and a later one that clears it
// (nil) or gives one conflicts.
func TestConflictingOptionFuncs(t *testing.T) {
	getenv := func(k string) string { return os.Getenv(k) }
	first := []scheduler.Option{scheduler.WithGetenv(getenv), scheduler.WithWorkers(2)}
	require.NoError(t, scheduler.ConflictingOption(first, []scheduler.Option{scheduler.WithWorkers(2)}))
	err := scheduler.ConflictingOption(first, []scheduler.Option{scheduler.WithGetenv(nil)})
	require.ErrorIs(t, err, scheduler.ErrBadOption)
	require.Contains(t, err.Error(), "scheduler.WithGetenv(nil) (option 1 of the later options) disagrees with the first options, which give scheduler.WithGetenv(a function)")
	err = scheduler.ConflictingOption(first, []scheduler.Option{scheduler.WithGetenv(getenv)})
	require.ErrorIs(t, err, scheduler.ErrBadOption, "the same function: it cannot be told from another")
}

// A library that shares the program's scheduler checks that the options
// it would have given agree with those that made it.
func ExampleConflictingOption() {
	made := []scheduler.Option{scheduler.WithPolicy("dmda"), scheduler.WithWorkers(4)}

	fmt.Println(scheduler.ConflictingOption(made, []scheduler.Option{scheduler.WithWorkers(4), scheduler.WithPolicy("dmda")}))
	fmt.Println(scheduler.ConflictingOption(made, []scheduler.Option{scheduler.WithPolicy("dmda"), scheduler.WithWorkers(2)}))
	fmt.Println(scheduler.ConflictingOption(made, []scheduler.Option{scheduler.WithStats(true)}))
	// Output:
	// <nil>
	// scheduler: invalid option: scheduler.WithWorkers(2) (option 2 of the later options) disagrees with the first options, which give scheduler.WithWorkers(4)
	// scheduler: invalid option: scheduler.WithStats(true) (option 1 of the later options) disagrees with the first options, which do not give scheduler.WithStats
}
