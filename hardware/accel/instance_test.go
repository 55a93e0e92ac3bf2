package accel_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/accel"
)

// instanceChildEnv makes TestSimInstanceAcrossProcesses, in a process it
// started, print the Instance of simsPerChild new simulated devices and return.
const instanceChildEnv = "PZ_ACCEL_INSTANCE_CHILD"

// simsPerChild is how many devices each child process makes.
const simsPerChild = 2000

// TestSimInstanceAcrossProcesses checks that Instance names a device
// object apart from every other, in this process and in others: ranks
// under MPI compare their devices' names to choose copies within one
// device (resourceset's device collectives), so two processes' devices
// must never share one. A name made of the object's address did in every
// pair of processes of a binary built with -race, whose heap starts at the
// same address each run (without -race Go randomizes it): rank 0 then
// took rank 1's buffer number for one of its own.
func TestSimInstanceAcrossProcesses(t *testing.T) {
	if os.Getenv(instanceChildEnv) != "" {
		for range simsPerChild {
			d, err := accel.NewSim(0, accel.SimConfig{})
			require.NoError(t, err)
			os.Stdout.WriteString("instance=" + d.Instance() + "\n")
			d.Close()
		}
		return
	}

	a, err := accel.NewSim(0, accel.SimConfig{})
	require.NoError(t, err)
	defer a.Close()
	b, err := accel.NewSim(0, accel.SimConfig{})
	require.NoError(t, err)
	defer b.Close()
	require.Equal(t, a.Instance(), a.Instance(), "one object, one name")
	require.NotEqual(t, a.Instance(), b.Instance(), "two objects of one id")
	require.True(t, strings.HasPrefix(a.Instance(), "sim0@"), a.Instance())

	// Two processes that make the same devices the same way: no name in
	// both.
	seen := map[string]int{a.Instance(): -1, b.Instance(): -1}
	for child := range 2 {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSimInstanceAcrossProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), instanceChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		n := 0
		for _, line := range strings.Split(string(out), "\n") {
			name, found := strings.CutPrefix(line, "instance=")
			if !found {
				continue
			}
			n++
			if other, dup := seen[name]; dup && other != child {
				require.Fail(t, "two processes' devices have one name", "process %d's device has the name %q of a device of process %d (-1: this one)", child, name, other)
			}
			seen[name] = child
		}
		require.Equal(t, simsPerChild, n, "%s", out)
	}
}
