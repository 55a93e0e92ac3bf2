package scheduler_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/pzgo/pz/scheduler"
)

// BenchmarkCheckNotInTask times the check every wait about to block
// makes (WaitAll, Wait, Unregister, a Synchronous Submit, dist's waits),
// called from the benchmark's goroutine, which runs no task, at two
// depths of its stack: reading a goroutine's id from its stack trace
// costs more the deeper the caller, which the comparison of the stack's
// root with the workers' avoids for a caller that is no worker.
func BenchmarkCheckNotInTask(b *testing.B) {
	s, err := scheduler.New(context.Background(), scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, depth := range []int{1, 40} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			var check func(int) error
			check = func(d int) error {
				if d > 1 {
					return check(d - 1)
				}
				for b.Loop() {
					if err := s.CheckNotInTask("bench"); err != nil {
						return err
					}
				}
				return nil
			}
			if err := check(depth); err != nil {
				b.Fatal(err)
			}
		})
	}
}
