// Command planner is the planner client of the static schedule in
// examples/stm/pipeline.yaml (docs/static-schedules.md): every 10 ms, plan
// runs on cpu0 once the camera's detect of the same frame has ended on
// the GPU, in another process, reads the latest detection from the memory
// both share, and checks it against the frame it redraws itself. It
// exits with status 1 if a detection was wrong.
//
//	examples/stm/run.sh        # compiles the schedule, runs the master and both clients, analyses the run
//
// or by hand, in three shells, in any order:
//
//	go run ./cmd/pzrun stm master examples/stm/pipeline.yaml -frames 200 -o run.json
//	go run ./examples/stm/planner
//	go run ./examples/stm/camera
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/pzgo/pz/examples/internal/cli"
	"github.com/pzgo/pz/examples/stm/shared"
	"github.com/pzgo/pz/scheduler/static"
)

func main() {
	dir := flag.String("dir", "", "the master's socket `directory` (default $PZ_STM_DIR, else $XDG_RUNTIME_DIR/pz-stm, else /dev/shm/pz-stm-UID, or /tmp/pz-stm-UID without /dev/shm)")
	cli.Parse("planner", "it takes only the flag -dir")
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "planner:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	if dir == "" {
		dir = static.DefaultDir(os.Getenv)
	}
	det, err := shared.Open(dir)
	if err != nil {
		return err
	}
	defer det.Close()

	// Made before the loop: plan redraws the frame into scratch.
	scratch := make([]byte, shared.FrameBytes)
	var runs, fresh, stale, wrong, last uint64

	c, err := static.NewClient("planner", static.WithClientDir(dir),
		static.WithClientLog(func(msg string) { fmt.Fprintln(os.Stderr, "planner:", msg) }))
	if err != nil {
		return err
	}
	c.Runnable("plan", func(context.Context) error {
		runs++
		id, sum, ok := det.Latest()
		switch {
		case !ok || id < last:
			wrong++ // plan depends on detect: a detection is always there
		case id == last:
			stale++ // the camera dropped a frame: no new detection
		default:
			last = id
			shared.Fill(scratch, id)
			if shared.Checksum(scratch) == sum {
				fresh++
			} else {
				wrong++
			}
		}
		return nil
	})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = c.EnterScheduler(ctx) // until the master's frame limit, a stop or a failure
	fmt.Printf("planner: %d frames run: %d new detections checked, %d frames without one, %d wrong\n", runs, fresh, stale, wrong)
	if err == nil && wrong > 0 {
		err = errors.New("some detections were wrong or missing")
	}
	return err
}
