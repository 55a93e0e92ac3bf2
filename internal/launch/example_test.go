package launch_test

import (
	"errors"
	"fmt"

	"github.com/pzgo/pz/internal/launch"
)

// A binary built without -tags mpi that mpirun started four times
// refuses to run four copies of rank 0; the same binary with no launcher,
// or built with MPI, may run.
func ExampleCheck() {
	// The environment mpirun -n 4 gives each rank.
	env := map[string]string{"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "0"}
	underMpirun := func(k string) string { return env[k] }
	info := launch.Detect(underMpirun)
	fmt.Println(info.Launcher, "ranks:", info.Size, "this one:", info.Rank)
	err := launch.Check(underMpirun, false)
	fmt.Println("without MPI:", errors.Is(err, launch.ErrNotBuiltWithMPI))
	fmt.Println("with MPI:", launch.Check(underMpirun, true))
	fmt.Println("no launcher:", launch.Check(func(string) string { return "" }, false))
	// Output:
	// openmpi ranks: 4 this one: 0
	// without MPI: true
	// with MPI: <nil>
	// no launcher: <nil>
}

// The launcher flags of each library pz builds against: a binary built
// with -tags mpi,mpich runs under MPICH's mpiexec, which needs no
// --oversubscribe.
func ExampleLauncher_Args() {
	mc, _ := launch.For(launch.MPICH)
	fmt.Println(mc.Library, mc.Args(4))
	om, _ := launch.For(launch.OpenMPI)
	fmt.Println(om.Library, om.Args(4)[:3])
	// Output:
	// mpich [-n 4]
	// openmpi [-n 4 --oversubscribe]
}
