package cli_test

import (
	"fmt"

	"github.com/pzgo/pz/examples/internal/cli"
)

func ExampleCheck() {
	fmt.Println(cli.Check("heat", cli.NoArgs, nil))
	fmt.Println(cli.Check("heat", cli.NoArgs, []string{"extra", "args"}))
	// Output:
	// <nil>
	// heat: arguments not understood: extra args (it takes none; PZ_RANKS=N sets the in-process ranks)
}
