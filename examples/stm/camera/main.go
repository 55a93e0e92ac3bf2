// Command camera is the camera client of the static schedule in
// examples/stm/pipeline.yaml (docs/static-schedules.md): every 10 ms, grab
// fills a frame buffer on cpu0, detect_submit hands the frame to the GPU
// from cpu1, and detect computes its checksum on gpu0.stream0 (simulated
// by a static.HostStream) into memory shared with the planner client
// (examples/stm/planner).
//
//	examples/stm/run.sh        # compiles the schedule, runs the master and both clients, analyses the run
//
// or by hand, in three shells, in any order:
//
//	go run ./cmd/pzrun stm master examples/stm/pipeline.yaml -frames 200 -o run.json
//	go run ./examples/stm/planner
//	go run ./examples/stm/camera
//
// Nothing allocates inside the scheduler's loop: the frame buffers, the
// GPU jobs and the counters are made before EnterScheduler.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/pzgo/pz/examples/internal/cli"
	"github.com/pzgo/pz/examples/stm/shared"
	"github.com/pzgo/pz/scheduler/static"
)

func main() {
	dir := flag.String("dir", "", "the master's socket `directory` (default $PZ_STM_DIR, else $XDG_RUNTIME_DIR/pz-stm, else /dev/shm/pz-stm-UID, or /tmp/pz-stm-UID without /dev/shm)")
	cli.Parse("camera", "it takes only the flag -dir")
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "camera:", err)
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
	det.Reset()

	// Two frame buffers: grab fills one while the GPU may still read the
	// other. grab writes frame n into bufs[n%2] only once the GPU has
	// released frame n-2, the buffer's previous frame, and drops the
	// frame otherwise, as a camera does when its consumer lags. The
	// atomics order each buffer's writes after its last reads: the
	// schedule orders runnables within a frame, not across frames.
	var bufs [2][]byte
	for i := range bufs {
		bufs[i] = make([]byte, shared.FrameBytes)
	}
	var grabbed, released atomic.Uint64 // the last frame filled; the last the GPU is done with
	var runs, dropped, detected uint64  // each written by one thread only
	var next, submitted uint64          // detect_submit's and detect's (the same thread)

	// The GPU work, one job per buffer, made once: enqueuing a job is
	// then passing a func value, with no closure made per frame.
	stream := static.NewHostStream()
	var jobs [2]func()
	for i := range jobs {
		buf := bufs[i]
		jobs[i] = func() {
			id := shared.ID(buf)
			det.Publish(id, shared.Checksum(buf))
			released.Store(id)
			detected++
		}
	}

	c, err := static.NewClient("camera", static.WithClientDir(dir),
		static.WithClientLog(func(msg string) { fmt.Fprintln(os.Stderr, "camera:", msg) }))
	if err != nil {
		return err
	}
	c.Runnable("grab", func(context.Context) error {
		runs++
		n := grabbed.Load() + 1
		if n > 2 && released.Load() < n-2 {
			dropped++
			return nil
		}
		shared.Fill(bufs[n%2], n)
		grabbed.Store(n)
		return nil
	})
	c.Runnable("detect_submit", func(context.Context) error {
		// grab of this frame has ended (a dependency); take its frame, or
		// a later one if grab has run again since.
		next = grabbed.Load()
		return nil
	})
	// The submittee runs right after its submitter, on its thread: it
	// enqueues the GPU work and returns without waiting for it.
	c.Runnable("detect", func(context.Context) error {
		if next > submitted { // else no new frame: nothing to enqueue
			stream.Enqueue(jobs[next%2])
			submitted = next
		}
		return nil
	})
	c.Resource("gpu0.stream0", stream)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = c.EnterScheduler(ctx) // until the master's frame limit, a stop or a failure
	stream.Close()              // let queued work end before the counts are read
	fmt.Printf("camera: %d frames run: %d grabbed, %d dropped, %d detected\n", runs, grabbed.Load(), dropped, detected)
	return err
}
