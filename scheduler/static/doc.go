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
package static
