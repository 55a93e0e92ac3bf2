package launch_test

import (
	"fmt"

	"github.com/pzgo/pz/internal/launch"
)

func ExampleCheck() {
	// The environment mpirun -n 4 gives each rank, seen by a binary built
	// without -tags mpi.
	env := map[string]string{"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "0"}
	err := launch.Check(func(k string) string { return env[k] }, false)
	fmt.Println(err != nil)
	fmt.Println(launch.Detect(func(k string) string { return env[k] }).Size)
	// Output:
	// true
	// 4
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
