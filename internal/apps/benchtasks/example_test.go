package benchtasks_test

import (
	"fmt"
	"strings"

	"github.com/pzgo/pz/internal/apps/benchtasks"
)

// Peer figures are looked up by the name the StarPU peer script prints.
func Example() {
	peer, err := benchtasks.ParsePeer(strings.NewReader(`# StarPU 1.3, 2 CPUs
starpu_c_rw1_lws_total 2.920 us/task
tasks_size_overhead_eff_16us_2cpu_lws 0.885 ratio
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range []string{
		benchtasks.PeerName(benchtasks.CaseChain, "lws", 2, 0),
		benchtasks.PeerName(benchtasks.CaseGrain, "lws", 2, 16),
	} {
		fmt.Println(name, peer[name].Value, peer[name].Unit)
	}
	// Output:
	// starpu_c_rw1_lws_total 2.92 us/task
	// tasks_size_overhead_eff_16us_2cpu_lws 0.885 ratio
}
