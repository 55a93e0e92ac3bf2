package chrometrace_test

import (
	"os"
	"time"

	"github.com/pzgo/pz/scheduler/internal/chrometrace"
)

func Example() {
	w := chrometrace.NewWriter(os.Stdout)
	w.Emit(chrometrace.ThreadName(0, 1, "cpu1"))
	w.Emit(chrometrace.Event{Name: "gemm", Ph: "X", Ts: chrometrace.Micros(1500 * time.Nanosecond), Dur: 2, Pid: 0, Tid: 1})
	w.Close()
	// Output:
	// {"displayTimeUnit":"ns","traceEvents":[
	// {"name":"thread_name","ph":"M","ts":0,"pid":0,"tid":1,"args":{"name":"cpu1"}}
	// ,{"name":"gemm","ph":"X","ts":1.5,"dur":2,"pid":0,"tid":1}
	// ]}
}
