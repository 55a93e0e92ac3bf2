package static_test

import (
	"context"
	"fmt"
	"log"

	"github.com/pzgo/pz/scheduler/static"
)

// Two clients in one process: sense (client a) and act (client b), act
// after sense in every frame, for three periods.
func ExampleRunLocal() {
	spec, err := static.Parse([]byte(`
overrun: noskip
hyperepochs:
  - {name: main, period: 5ms, resources: [cpu0, cpu1], epochs: [{name: frame}]}
clients: [a, b]
runnables:
  - {name: sense, client: a, resource: cpu0, wcet: 1ms}
  - {name: act,   client: b, resource: cpu1, wcet: 1ms, deps: [sense]}
`), "example.yaml")
	if err != nil {
		log.Fatal(err)
	}
	plan, err := static.Compile(spec)
	if err != nil {
		log.Fatal(err)
	}
	// Preallocated: runnables should not allocate inside the loop.
	var sensed, acted [3]int
	n := 0
	a, _ := static.NewClient("a")
	a.Runnable("sense", func(context.Context) error { sensed[n%3] = n * n; n++; return nil })
	b, _ := static.NewClient("b")
	m := 0
	b.Runnable("act", func(context.Context) error { acted[m%3] = sensed[m%3] + 1; m++; return nil })

	run, err := static.RunLocal(context.Background(), plan, []*static.Client{a, b}, static.WithFrames(3))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("periods:", run.Periods, "stopped:", run.Stopped)
	fmt.Println("act saw each frame's sense:", acted)
	// Output:
	// periods: 3 stopped: frame limit (3 periods)
	// act saw each frame's sense: [1 2 5]
}
