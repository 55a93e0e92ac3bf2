// Package static runs static periodic schedules, in the manner of NVIDIA
// DriveWorks' System Task Manager: a fixed, verified plan of runnables
// spread over clients (processes or in-process), each runnable at a fixed
// offset on its resource (a CPU core or a GPU stream) in every frame.
//
// # Schedules
//
// A schedule is YAML (docs/static-schedules.md documents every key):
// hyperepochs own resources and repeat at a period; their epochs run one
// after another, each for a number of frames; runnables name their client,
// resource, WCET and dependencies. Parse reads it, Compile verifies it and
// places every runnable (list scheduling by critical path), and the Plan
// it returns is written as JSON by WritePlan.
//
//	spec, err := static.Parse(src, "pipeline.yaml")
//	plan, err := static.Compile(spec)   // every problem, with its line and the fix
//	static.WriteTimeline(os.Stdout, plan)
//
// # Stopping
//
// A stop (the frame limit, ExitScheduler, SIGINT or SIGTERM, a context's
// end) ends the run at a period boundary: a period that a resource's
// thread has begun runs to its end, no body is cut short, and on time
// every runnable has run the same periods. A thread that reaches its next
// boundary far behind the plan after the stop was asked for (two periods
// or more, and 100 ms or a quarter of the liveness bound, whichever is
// less: an overloaded client) abandons its backlog instead of running
// every period up to the master's boundary: it runs none of them, and
// publishes their frames as ended and skipped so that what waits for them
// in other clients goes on; the record keeps the frames it ran, so that
// each runnable's last frame says the last period its client completed,
// and counts those it gave up (RunnableRun.Abandoned). That may be its
// first boundary (a thread started late on a loaded machine): its
// runnables then have no row at all, and Analysis.NoFrame names them.
// After a stop, the liveness bound counts from the stop: the run ends
// with the stop's reason, and a client is blamed only if it does not end
// the period it is in within the bound (a body that never returns).
// docs/static-schedules.md#stopping has the details.
//
// # The start
//
// Once every client has joined, the master sends each the plan and the
// board; each client builds its records, collects its setup's garbage,
// starts its resource threads and pins them, then says it is ready. The
// master writes t0, the first period's start, on the board the start
// delay (WithStartDelay) after the last client is ready, so that no
// client's setup is counted inside the plan; a client not ready within
// WithSetupTimeout of the start aborts the run, named.
//
// # Failures
//
// The master watches its clients (a client whose runnables fall more
// than the liveness bound behind the plan, or whose connection closes,
// aborts the run: ErrAborted, naming it; so does a client that does
// not take a message of the master, its start included, within the
// liveness bound: the master writes to each client from a queue and a
// goroutine of that client's, and never waits on a client's socket
// itself), and the clients watch the
// master: it beats on the board while it watches the run, and a client
// leaves with an error that is ErrAborted and ErrMasterLost, naming the
// master's process and board, when the master's connection closes mid-run
// (killed, crashed) or its last beat is older than the client's master
// timeout (stopped, deadlocked, starved; WithMasterTimeout, by default the
// master's liveness bound). Before the start, with no board yet, the
// master beats in messages to the clients that have joined, from the
// loop that waits for the others, so that a client waits as long as it
// takes for clients not yet started but leaves (the same errors, naming
// the master's pid and socket) when the master itself stops beating or
// exits. Client and master must come from the same pz: a master refuses
// a client of another protocol version, and a client names a board of
// another format, each saying both versions.
// docs/static-schedules.md#timing-faults has the details.
package static
