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
