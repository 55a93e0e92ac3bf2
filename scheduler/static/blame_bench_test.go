package static_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/pzgo/pz/scheduler/static"
)

// benchRun is a recorded run shaped like pzrun stm bench's schedule:
// runnables in one chain per core (each depends on the one before it on
// its core), each a slot of the period long with half of it its WCET,
// over frames periods of 1 ms. Every 10th frame the first of each chain
// runs past its WCET into the next slot, so that the rest of its chain
// starts late and misses its deadline: a record whose analysis blames
// late starts in a tenth of the frames.
func benchRun(runnables, cores int, frames int) *static.Run {
	const period = int64(time.Millisecond)
	per := (runnables + cores - 1) / cores
	slot := period / int64(per)
	wcet := slot / 2
	r := &static.Run{Format: "pz-stm-run", Version: static.RunVersion, Plan: "0123456789abcdef", Source: "bench.yaml", Periods: frames,
		Stopped: "frame limit", Hyperepochs: []static.RunHyperepoch{{Name: "main", Period: period, Periods: frames}}}
	prev := make([]string, cores)
	for i := 0; i < runnables; i++ {
		core, k := i%cores, int64(i/cores)
		rr := static.RunnableRun{Name: fmt.Sprintf("r%03d", i), Client: fmt.Sprintf("c%d", core), Resource: fmt.Sprintf("cpu%d", core), WCET: wcet}
		if prev[core] != "" {
			rr.Deps = []string{prev[core]}
		}
		prev[core] = rr.Name
		for f := int64(0); f < int64(frames); f++ {
			p := f*period + k*slot
			s, e, flags := p, p+wcet/2, 0
			if f%10 == 0 {
				// The first runs 2 slots, past its WCET; the rest of
				// its chain starts a slot late, runs its WCET and misses
				// its deadline (a quarter slot after its planned end).
				if k == 0 {
					e, flags = p+2*slot, static.FlagOverrunWCET|static.FlagOverrunDeadline
				} else {
					s, e, flags = p+slot, p+slot+wcet, static.FlagOverrunDeadline
				}
			}
			rr.Seq = append(rr.Seq, f)
			rr.Planned = append(rr.Planned, p)
			rr.Deadline = append(rr.Deadline, p+wcet+slot/4)
			rr.Start = append(rr.Start, s)
			rr.End = append(rr.End, e)
			rr.Flags = append(rr.Flags, flags)
			rr.AllocObjects = append(rr.AllocObjects, 0)
			rr.AllocBytes = append(rr.AllocBytes, 0)
		}
		r.Runnables = append(r.Runnables, rr)
	}
	return r
}

// BenchmarkAnalyzeBlame times the analysis, blame included, of a run
// of the size pzrun stm bench records by default (16 runnables on 2
// cores, 10,000 periods: 160,000 rows) and of 10 times that.
func BenchmarkAnalyzeBlame(b *testing.B) {
	for _, size := range []struct {
		name                      string
		runnables, cores, periods int
	}{
		{"bench-16x10000", 16, 2, 10000},
		{"10x-16x100000", 16, 2, 100000},
	} {
		r := benchRun(size.runnables, size.cores, size.periods)
		b.Run(size.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				a := static.Analyze(r)
				if a.StartedLate == 0 {
					b.Fatal("no late start")
				}
			}
		})
	}
}
