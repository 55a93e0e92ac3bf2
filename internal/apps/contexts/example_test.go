package contexts_test

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/internal/apps/contexts"
)

// Run the three modes on small matrices and check the factorizations.
func Example() {
	res, err := contexts.Run(context.Background(), contexts.Options{Small: 64, Large: 256, Block: 32, Workers: 2, Check: true}, nil)
	if err != nil {
		panic(err)
	}
	for _, m := range []contexts.ModeResult{res.Global, res.Static, res.Hypervisor} {
		fmt.Printf("%s: residuals below 1e-4: %v\n", m.Mode, m.ResidualSmall < 1e-4 && m.ResidualLarge < 1e-4)
	}
	// Output:
	// global: residuals below 1e-4: true
	// static: residuals below 1e-4: true
	// hypervisor: residuals below 1e-4: true
}
