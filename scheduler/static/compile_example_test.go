package static_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/pzgo/pz/scheduler/static"
)

// A camera grabs a frame on one core, enqueues detection on the GPU from
// another, and a planner uses the result: Compile places each runnable
// after what it depends on, and the timeline shows where.
func Example() {
	src := `
hyperepochs:
  - name: main
    period: 10ms
    resources: [cpu0, cpu1, gpu0.stream0]
    epochs:
      - {name: frame, frames: 2, period: 5ms}
clients: [camera, planner]
runnables:
  - {name: grab, client: camera, resource: cpu0, wcet: 1ms}
  - {name: enqueue, client: camera, resource: cpu1, wcet: 200us, deps: [grab]}
  - {name: detect, client: camera, resource: gpu0.stream0, wcet: 2ms, submitter: enqueue}
  - {name: plan, client: planner, resource: cpu0, wcet: 1ms, deps: [detect]}
  - {name: log, client: planner, resource: cpu0, wcet: 500us}
`
	spec, err := static.Parse([]byte(src), "camera.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	plan, err := static.Compile(spec)
	if err != nil {
		fmt.Println(err)
		return
	}
	var b strings.Builder
	if err := static.WriteTimeline(&b, plan); err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		fmt.Println(strings.TrimRight(line, " ")) // tabwriter pads the last column
	}
	// Output:
	// schedule camera.yaml (plan 1e7f7ef06a018b7a)
	//
	// hyperepoch main: period 10ms on cpu0, cpu1, gpu0.stream0
	//   epoch frame: 2 frame(s) of 5ms from 0
	//     start  end    deadline  slack  resource      client   runnable
	//     0      1ms    1.8ms     800µs  cpu0          camera   grab
	//     1ms    1.5ms  4ms       2.5ms  cpu0          planner  log
	//     1ms    1.2ms  2ms       800µs  cpu1          camera   enqueue
	//     1.2ms  3.2ms  4ms       800µs  gpu0.stream0  camera   detect (submitted by enqueue)
	//     3.2ms  4.2ms  5ms       800µs  cpu0          planner  plan
	//   load over the period:
	//     cpu0          5ms    50%
	//     cpu1          400µs  4%
	//     gpu0.stream0  4ms    40%
}

// Compile reports each problem with its line and what to do about it.
func ExampleCompile_error() {
	src := `hyperepochs:
  - {name: main, period: 10ms, resources: [cpu0], epochs: [{name: frame}]}
clients: [camera]
runnables:
  - {name: grab, client: camera, resource: cpu0, wcet: 4ms}
  - {name: plan, client: camera, resource: cpu0, wcet: 2ms, deps: [grap]}
`
	spec, err := static.Parse([]byte(src), "camera.yaml")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	_, err = static.Compile(spec)
	fmt.Println(err)
	// Output:
	// camera.yaml:6: runnable "plan" depends on "grap", which is not a runnable; did you mean "grab"?
}
