package static_test

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler/static"
)

// head is a hyperepoch of one epoch on two cores and a GPU stream, and
// two clients: runnables start on line 5.
const head = `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0, cpu1, gpu0.stream0], epochs: [{name: f}]}
clients: [c, d]
runnables:
`

// TestCompileErrors: every problem of meaning that Compile reports, with
// its line and the exact message.
func TestCompileErrors(t *testing.T) {
	runErrCases(t, []errCase{
		// The schedule's parts.
		{
			name: "no hyperepochs",
			src:  "hyperepochs: []\nclients: [c]\nrunnables:\n  - {name: a, client: c, resource: cpu0, wcet: 1ms}\n",
			want: `s.yaml:1: the schedule has no hyperepochs; add one with a period, resources and epochs`,
		},
		{
			name: "no clients and no runnables",
			src:  "hyperepochs:\n  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}\nclients: []\nrunnables: []\n",
			want: `s.yaml:1: the schedule has no clients; list the programs that run runnables, e.g. clients: [camera]
s.yaml:1: the schedule has no runnables; add some under runnables:`,
		},
		{
			name: "hyperepoch defined twice",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
  - {name: h, period: 10ms, resources: [cpu1], epochs: [{name: g}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, epoch: f, wcet: 1ms}
`,
			want: `s.yaml:3: hyperepoch "h" is defined twice (first on line 2); rename one`,
		},
		{
			name: "epoch defined twice",
			src: `hyperepochs:
  - name: h
    period: 10ms
    resources: [cpu0]
    epochs:
      - {name: f}
      - {name: f}
  - {name: k, period: 10ms, resources: [cpu1], epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, epoch: f, wcet: 1ms}
`,
			want: `s.yaml:7: epoch "f" is defined twice (first in hyperepoch "h"); epoch names are unique in a schedule
s.yaml:8: epoch "f" is defined twice (first in hyperepoch "h"); epoch names are unique in a schedule`,
		},
		{
			name: "client listed twice",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
clients:
  - c
  - d
  - c
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ms}
`,
			want: `s.yaml:6: client "c" is listed twice (first on line 4); list it once`,
		},
		{
			name: "runnable defined twice",
			src: head + `  - {name: a, client: c, resource: cpu0, wcet: 1ms}
  - {name: a, client: c, resource: cpu1, wcet: 1ms}
`,
			want: `s.yaml:6: runnable "a" is defined twice (first on line 5); rename one`,
		},
		{
			// The trial's bad/dups2.yaml: a runnable defined twice is a
			// problem of the Runnables stage, reported once the structure
			// (the client listed twice) is right.
			name: "client and runnable defined twice",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
clients: [c, c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ms}
  - {name: a, client: c, resource: cpu0, wcet: 1ms}
`,
			want: `s.yaml:3: client "c" is listed twice on this line; list it once`,
		},
		{
			// The trial's bad/dups3.yaml: with the runnables' other
			// problems.
			name: "runnable defined twice and an unknown client",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ms}
  - {name: a, client: c, resource: cpu0, wcet: 1ms}
  - {name: b, client: d, resource: cpu0, wcet: 1ms}
`,
			want: `s.yaml:6: runnable "a" is defined twice (first on line 5); rename one
s.yaml:7: runnable "b" names client "d", which is not in clients (c); add it there or fix the name`,
		},
		{
			// The trial's bad/idleclient.yaml: the master would wait for
			// ghost forever.
			name: "client without runnables",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
clients: [c, ghost]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ms}
`,
			want: `s.yaml:3: client "ghost" has no runnables, and the master would wait for it forever; give it one (client: ghost) or remove it from clients`,
		},
		{
			name: "clients without runnables, one per line",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
clients:
  - idle
  - c
  - spare
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ms}
`,
			want: `s.yaml:4: client "idle" has no runnables, and the master would wait for it forever; give it one (client: idle) or remove it from clients
s.yaml:6: client "spare" has no runnables, and the master would wait for it forever; give it one (client: spare) or remove it from clients`,
		},

		// Resources.
		{
			name: "invalid resource names",
			src: `hyperepochs:
  - name: h
    period: 10ms
    resources: [cpu, cpu01, cpu-1, core0, gpu0, gpu0.stream, gpu0.stream01, gpu.stream0, gpu0.stream0.x, CPU0, GPU1.Stream2]
    epochs: [{name: f}]
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ms}
`,
			want: `s.yaml:4: resource "cpu" is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0)
s.yaml:4: resource "cpu01" is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0); did you mean "cpu1"?
s.yaml:4: resource "cpu-1" is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0)
s.yaml:4: resource "core0" is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0)
s.yaml:4: resource "gpu0" is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0); did you mean "gpu0.stream0"?
s.yaml:4: resource "gpu0.stream" is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0)
s.yaml:4: resource "gpu0.stream01" is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0); did you mean "gpu0.stream1"?
s.yaml:4: resource "gpu.stream0" is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0)
s.yaml:4: resource "gpu0.stream0.x" is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0)
s.yaml:4: resource "CPU0" is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0); did you mean "cpu0"?
s.yaml:4: resource "GPU1.Stream2" is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0); did you mean "gpu1.stream2"?`,
		},
		{
			name: "resource listed twice",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0, cpu1, cpu0], epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ms}
`,
			want: `s.yaml:2: resource "cpu0" is listed twice in hyperepoch "h"; list it once`,
		},
		{
			name: "resource in two hyperepochs",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0, gpu0.stream0], epochs: [{name: f}]}
  - {name: k, period: 5ms, resources: [cpu1, gpu0.stream0], epochs: [{name: g}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, epoch: f, wcet: 1ms}
`,
			want: `s.yaml:3: resource "gpu0.stream0" is in hyperepochs "h" and "k"; a resource belongs to one hyperepoch: give each its own resources`,
		},

		// Epochs and periods.
		{
			name: "hyperepoch without epochs",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: []}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ms}
`,
			want: `s.yaml:2: hyperepoch "h" has no epochs; add one, e.g. epochs: [{name: frame}]`,
		},
		{
			name: "epochs exceed the hyperepoch period",
			src: `hyperepochs:
  - name: h
    period: 10ms
    resources: [cpu0]
    epochs:
      - {name: f, frames: 2, period: 4ms}
      - {name: g, period: 3ms}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, epoch: f, wcet: 1ms}
`,
			want: `s.yaml:2: the epochs of hyperepoch "h" take 11ms (frames × period), more than its period 10ms; shorten them or lengthen the period`,
		},
		{
			name: "epoch gets no time",
			src: `hyperepochs:
  - name: h
    period: 10ms
    resources: [cpu0]
    epochs:
      - {name: f, frames: 2, period: 5ms}
      - {name: g}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, epoch: f, wcet: 1ms}
`,
			want: `s.yaml:7: epoch "g" gets no time: the other epochs of "h" take all of its period 10ms; give it a period`,
		},
		{
			// frames × period is 2^64ns, which wrapped around to 0 and
			// passed.
			name: "frames times period overflows",
			src: `hyperepochs:
  - name: h
    period: 10ms
    resources: [cpu0]
    epochs:
      - {name: f, frames: 4611686018427387904, period: 4ns}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ns}
`,
			want: `s.yaml:2: the epochs of hyperepoch "h" (frames × period) take more than 2562047h47m16.854775807s (the longest duration), more than its period 10ms; shorten them or lengthen the period`,
		},
		{
			// The frames of the epochs that share the period added up to
			// 2^64+1, which wrapped around to 1 and gave each 10ms.
			name: "shared frames overflow",
			src: `hyperepochs:
  - name: h
    period: 10ms
    resources: [cpu0]
    epochs:
      - {name: f, frames: 9223372036854775807}
      - {name: g, frames: 9223372036854775807}
      - {name: e, frames: 3}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, epoch: f, wcet: 1ns}
`,
			want: `s.yaml:6: epoch "f" gets frames of 0ns: the 10ms left of the period of "h", shared among more than 9223372036854775807 frames, is less than 1ns a frame; give fewer frames or a longer period
s.yaml:7: epoch "g" gets frames of 0ns: the 10ms left of the period of "h", shared among more than 9223372036854775807 frames, is less than 1ns a frame; give fewer frames or a longer period
s.yaml:8: epoch "e" gets frames of 0ns: the 10ms left of the period of "h", shared among more than 9223372036854775807 frames, is less than 1ns a frame; give fewer frames or a longer period`,
		},

		{
			// The frames were MaxInt exactly, and it said "more than
			// 9223372036854775806".
			name: "frames of the largest int",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f, frames: 9223372036854775807}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ns}
`,
			want: `s.yaml:2: epoch "f" gets frames of 0ns: the 10ms left of the period of "h", shared among 9223372036854775807 frames, is less than 1ns a frame; give fewer frames or a longer period`,
		},
		{
			// The saturated sum was printed as if it were the sum.
			name: "epochs past the longest duration",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f, frames: 4611686018427387904, period: 2ns}, {name: g, period: 1ms}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, epoch: f, wcet: 1ns}
`,
			want: `s.yaml:2: the epochs of hyperepoch "h" (frames × period) take more than 2562047h47m16.854775807s (the longest duration), more than its period 10ms; shorten them or lengthen the period`,
		},
		{
			// It compiled, and the master's times wrapped around.
			name: "period longer than MaxPeriod",
			src: `hyperepochs:
  - {name: h, period: 2562047h, resources: [cpu0], epochs: [{name: f}]}
  - {name: k, period: 24h0m0.000000001s, resources: [cpu1], epochs: [{name: g}]}
  - {name: e, period: 24h, resources: [cpu2], epochs: [{name: d}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, epoch: f, wcet: 1ms}
`,
			want: `s.yaml:2: the period of hyperepoch "h" is 2562047h0m0s, longer than the longest a run can keep time over, 24h; shorten it (a static schedule repeats every few ms or s)
s.yaml:3: the period of hyperepoch "k" is 24h0m0.000000001s, longer than the longest a run can keep time over, 24h; shorten it (a static schedule repeats every few ms or s)`,
		},
		{
			name: "spin longer than MaxPeriod",
			src:  head + "  - {name: a, client: c, resource: cpu0, wcet: 1ms}\nspin: 25h\n",
			want: `s.yaml:1: spin 25h0m0s is longer than the longest period, 24h; spin for a few µs (the default is 50µs)`,
		},

		// Runnables' names and places.
		{
			name: "unknown client",
			src:  head + "  - {name: a, client: camera, resource: cpu0, wcet: 1ms}\n",
			want: `s.yaml:5: runnable "a" names client "camera", which is not in clients (c, d); add it there or fix the name`,
		},
		{
			name: "no epoch among several",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}, {name: g}]}
  - {name: k, period: 10ms, resources: [cpu1], epochs: [{name: e}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ms}
`,
			want: `s.yaml:6: runnable "a" has no epoch and the schedule has 3; add epoch: one of f, g, e`,
		},
		{
			name: "unknown epoch",
			src:  head + "  - {name: a, client: c, resource: cpu0, epoch: frame, wcet: 1ms}\n",
			want: `s.yaml:5: runnable "a" names epoch "frame", which no hyperepoch has; the epochs are f`,
		},
		{
			// The unknown epoch hid the unknown resource.
			name: "unknown epoch and resource",
			src:  head + "  - {name: a, client: c, resource: cpu7, epoch: frame, wcet: 1ms}\n  - {name: b, client: c, resource: cpu1, epoch: nope, wcet: 1ms, submitter: a}\n  - {name: k, client: c, resource: core1, epoch: nope, wcet: 1ms}\n",
			want: `s.yaml:5: runnable "a" names epoch "frame", which no hyperepoch has; the epochs are f
s.yaml:5: runnable "a" runs on resource "cpu7", which no hyperepoch lists; add it to the resources of its epoch's hyperepoch
s.yaml:6: runnable "b" names epoch "nope", which no hyperepoch has; the epochs are f
s.yaml:6: runnable "b" has a submitter but runs on the CPU core "cpu1"; only a GPU stream runnable (gpuN.streamM) has a submitter: move it to a stream or drop submitter
s.yaml:7: runnable "k" names epoch "nope", which no hyperepoch has; the epochs are f
s.yaml:7: runnable "k" runs on "core1", which is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0)`,
		},
		{
			name: "resource not listed",
			src:  head + "  - {name: a, client: c, resource: cpu7, wcet: 1ms}\n",
			want: `s.yaml:5: runnable "a" runs on resource "cpu7", which no hyperepoch lists; add it to the resources of "h"`,
		},
		{
			// The trial's bad/unknownres.yaml: a name that is no resource
			// at all is said to be none (listing it would only fail), with
			// the resource it likely means.
			name: "runnable on a name that is no resource",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: x, client: c, resource: cpu3, wcet: 1ms}
  - {name: y, client: c, resource: gpu0, wcet: 1ms}
  - {name: z, client: c, resource: CPU0, wcet: 1ms}
  - {name: w, client: c, resource: cpu_0, wcet: 1ms}
  - {name: v, client: c, resource: core0, wcet: 1ms}
`,
			want: `s.yaml:5: runnable "x" runs on resource "cpu3", which no hyperepoch lists; add it to the resources of "h"
s.yaml:6: runnable "y" runs on "gpu0", which is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0); did you mean "gpu0.stream0"?
s.yaml:7: runnable "z" runs on "CPU0", which is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0); did you mean "cpu0"?
s.yaml:8: runnable "w" runs on "cpu_0", which is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0); did you mean "cpu0"?
s.yaml:9: runnable "v" runs on "core0", which is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0)`,
		},
		{
			name: "resource of another hyperepoch",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0, cpu1], epochs: [{name: f}]}
  - {name: k, period: 10ms, resources: [cpu2], epochs: [{name: g}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu2, epoch: f, wcet: 1ms}
`,
			want: `s.yaml:6: runnable "a" of epoch "f" runs on "cpu2", a resource of hyperepoch "k"; use one of cpu0, cpu1`,
		},
		{
			name: "CPU runnable with a submitter",
			src: head + `  - {name: a, client: c, resource: cpu0, wcet: 1ms}
  - {name: b, client: c, resource: cpu1, wcet: 1ms, submitter: a}
`,
			want: `s.yaml:6: runnable "b" has a submitter but runs on the CPU core "cpu1"; only a GPU stream runnable (gpuN.streamM) has a submitter: move it to a stream or drop submitter`,
		},
		{
			name: "GPU runnable without a submitter",
			src:  head + "  - {name: k, client: d, resource: gpu0.stream0, wcet: 1ms}\n",
			want: `s.yaml:5: runnable "k" runs on the GPU stream "gpu0.stream0" but has no submitter; add submitter: the CPU runnable of client "d" that enqueues its work`,
		},

		// Dependencies and submitters.
		{
			name: "unknown dependency",
			src: head + `  - {name: grab, client: c, resource: cpu0, wcet: 1ms}
  - {name: plan, client: c, resource: cpu1, wcet: 1ms, deps: [grap, detect]}
`,
			want: `s.yaml:6: runnable "plan" depends on "grap", which is not a runnable; did you mean "grab"?
s.yaml:6: runnable "plan" depends on "detect", which is not a runnable`,
		},
		{
			name: "self dependency",
			src:  head + "  - {name: a, client: c, resource: cpu0, wcet: 1ms, deps: [a]}\n",
			want: `s.yaml:5: runnable "a" depends on itself; remove it from its deps`,
		},
		{
			name: "duplicate dependency",
			src: head + `  - {name: a, client: c, resource: cpu0, wcet: 1ms}
  - {name: b, client: c, resource: cpu1, wcet: 1ms, deps: [a, a]}
`,
			want: `s.yaml:6: runnable "b" lists "a" twice in deps; list it once`,
		},
		{
			name: "cross-epoch dependency",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}, {name: g}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, epoch: f, wcet: 1ms}
  - {name: b, client: c, resource: cpu0, epoch: g, wcet: 1ms, deps: [a]}
`,
			want: `s.yaml:6: runnable "b" (epoch "g") depends on "a" of epoch "f"; dependencies stay inside an epoch: move one of them`,
		},
		{
			name: "submitter in deps",
			src: head + `  - {name: s, client: c, resource: cpu0, wcet: 1ms}
  - {name: k, client: c, resource: gpu0.stream0, wcet: 1ms, submitter: s, deps: [s]}
  - {name: w, client: c, resource: cpu1, wcet: 1ms, deps: [k]}
`,
			want: `s.yaml:6: runnable "k" lists its submitter "s" in deps; a submittee always follows its submitter: drop it from deps`,
		},
		{
			name: "waits on its own submittee",
			src: head + `  - {name: s, client: c, resource: cpu0, wcet: 1ms, deps: [k]}
  - {name: k, client: c, resource: gpu0.stream0, wcet: 1ms, submitter: s}
`,
			want: `s.yaml:5: runnable "s" waits for "k", which it submits itself; only another runnable may wait for a submittee`,
		},
		{
			name: "unknown submitter",
			src:  head + "  - {name: k, client: c, resource: gpu0.stream0, wcet: 1ms, submitter: sub}\n",
			want: `s.yaml:5: runnable "k" names submitter "sub", which is not a runnable`,
		},
		{
			name: "misspelt submitter",
			src: head + `  - {name: dnn_submit, client: c, resource: cpu0, wcet: 1ms}
  - {name: k, client: c, resource: gpu0.stream0, wcet: 1ms, submitter: dnn_sumbit}
`,
			want: `s.yaml:6: runnable "k" names submitter "dnn_sumbit", which is not a runnable; did you mean "dnn_submit"?`,
		},
		{
			name: "submitter on a GPU stream",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0, gpu0.stream0, gpu0.stream1], epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: s, client: c, resource: cpu0, wcet: 1ms}
  - {name: k1, client: c, resource: gpu0.stream0, wcet: 1ms, submitter: s}
  - {name: k2, client: c, resource: gpu0.stream1, wcet: 1ms, submitter: k1}
`,
			want: `s.yaml:7: runnable "k2" names submitter "k1", which runs on "gpu0.stream0"; a submitter runs on a CPU core`,
		},
		{
			name: "submitter of another client",
			src: head + `  - {name: s, client: c, resource: cpu0, wcet: 1ms}
  - {name: k, client: d, resource: gpu0.stream0, wcet: 1ms, submitter: s}
`,
			want: `s.yaml:6: runnable "k" of client "d" names submitter "s" of client "c"; a client submits only to its own streams`,
		},
		{
			name: "submitter of another epoch",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0, gpu0.stream0], epochs: [{name: f}, {name: g}]}
clients: [c]
runnables:
  - {name: s, client: c, resource: cpu0, epoch: f, wcet: 1ms}
  - {name: k, client: c, resource: gpu0.stream0, epoch: g, wcet: 1ms, submitter: s}
`,
			want: `s.yaml:6: runnable "k" names submitter "s" of another epoch; put them in the same epoch`,
		},
		{
			name: "submittee with no waiter",
			src: head + `  - {name: s, client: c, resource: cpu0, wcet: 1ms}
  - {name: k, client: c, resource: gpu0.stream0, wcet: 1ms, submitter: s}
`,
			want: `s.yaml:6: submittee "k" has no waiter: nothing knows when its GPU work ends; add "k" to the deps of the runnable that uses its result`,
		},

		// Cycles: each reported once, at the line of the runnable where
		// the search closed it.
		{
			name: "2-cycle",
			src: head + `  - {name: a, client: c, resource: cpu0, wcet: 1ms, deps: [b]}
  - {name: b, client: c, resource: cpu1, wcet: 1ms, deps: [a]}
`,
			want: `s.yaml:5: dependency cycle: a -> b -> a (each runs after the one before it); remove one of these deps`,
		},
		{
			name: "3-cycle",
			src: head + `  - {name: x, client: c, resource: cpu0, wcet: 1ms, deps: [z]}
  - {name: y, client: c, resource: cpu1, wcet: 1ms, deps: [x]}
  - {name: z, client: c, resource: cpu0, wcet: 1ms, deps: [y]}
`,
			want: `s.yaml:5: dependency cycle: x -> y -> z -> x (each runs after the one before it); remove one of these deps`,
		},
		{
			name: "cycle entered from outside",
			src: head + `  - {name: in, client: c, resource: cpu0, wcet: 1ms, deps: [b]}
  - {name: a, client: c, resource: cpu0, wcet: 1ms, deps: [b]}
  - {name: b, client: c, resource: cpu1, wcet: 1ms, deps: [a]}
  - {name: out, client: c, resource: cpu1, wcet: 1ms, deps: [a, in]}
`,
			want: `s.yaml:7: dependency cycle: b -> a -> b (each runs after the one before it); remove one of these deps`,
		},
		{
			name: "two cycles",
			src: head + `  - {name: a, client: c, resource: cpu0, wcet: 1ms, deps: [b]}
  - {name: b, client: c, resource: cpu1, wcet: 1ms, deps: [a]}
  - {name: x, client: c, resource: cpu0, wcet: 1ms, deps: [x2]}
  - {name: x2, client: c, resource: cpu1, wcet: 1ms, deps: [x]}
`,
			want: `s.yaml:5: dependency cycle: a -> b -> a (each runs after the one before it); remove one of these deps
s.yaml:7: dependency cycle: x -> x2 -> x (each runs after the one before it); remove one of these deps`,
		},
		{
			name: "cycle through a submitter",
			src: head + `  - {name: s, client: c, resource: cpu0, wcet: 1ms, deps: [w]}
  - {name: k, client: c, resource: gpu0.stream0, wcet: 1ms, submitter: s}
  - {name: w, client: c, resource: cpu1, wcet: 1ms, deps: [k]}
`,
			want: `s.yaml:5: dependency cycle: s -> k -> w -> s (each runs after the one before it); remove one of these deps`,
		},

		// Time.
		{
			name: "WCETs on one resource exceed the frame",
			src: head + `  - {name: a, client: c, resource: cpu0, wcet: 6ms}
  - {name: b, client: c, resource: cpu0, wcet: 5ms}
  - {name: x, client: c, resource: cpu1, wcet: 4ms}
`,
			want: `s.yaml:2: the WCETs on cpu0 in epoch "f" add up to 11ms, more than its frame of 10ms (a 6ms, b 5ms); lower them, move runnables to other resources or lengthen the period`,
		},
		{
			name: "critical chain exceeds the frame",
			src: head + `  - {name: a, client: c, resource: cpu0, wcet: 4ms}
  - {name: s, client: c, resource: cpu1, wcet: 3ms, deps: [a]}
  - {name: k, client: c, resource: gpu0.stream0, wcet: 2.5ms, submitter: s}
  - {name: b, client: c, resource: cpu0, wcet: 1ms, deps: [k]}
`,
			want: `s.yaml:2: the longest dependency chain in epoch "f" takes 10.5ms, more than its frame of 10ms (a 4ms -> s 3ms -> k 2.5ms -> b 1ms); lower these WCETs, break the chain or lengthen the period`,
		},
		{
			// Each core's load is 10ms and the longest chain 10ms, but
			// whichever of L and S runs first on cpu0, its successor on
			// cpu1 ends after 10ms.
			name: "placement does not fit",
			src: head + `  - {name: L, client: c, resource: cpu0, wcet: 6ms}
  - {name: M, client: c, resource: cpu1, wcet: 4ms, deps: [L]}
  - {name: S, client: c, resource: cpu0, wcet: 4ms}
  - {name: T, client: c, resource: cpu1, wcet: 5ms, deps: [S]}
`,
			want: `s.yaml:2: epoch "f" does not fit its frame of 10ms: the placed runnables end at 15ms although every resource's load and the longest chain fit; lengthen the period or lower WCETs (see the timeline of pzrun stm compile with a longer period)`,
		},
		{
			// Compile used to dereference a nil placement after the first
			// epoch that did not fit; every epoch is reported.
			name: "two epochs do not fit",
			src: `hyperepochs:
  - name: h
    period: 10ms
    resources: [cpu0, cpu1]
    epochs:
      - {name: f, frames: 1, period: 4ms}
      - {name: ok, frames: 1, period: 2ms}
      - {name: g}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, epoch: f, wcet: 3ms}
  - {name: b, client: c, resource: cpu0, epoch: f, wcet: 2ms}
  - {name: fine, client: c, resource: cpu0, epoch: ok, wcet: 2ms}
  - {name: x, client: c, resource: cpu0, epoch: g, wcet: 3ms}
  - {name: y, client: c, resource: cpu1, epoch: g, wcet: 2ms, deps: [x]}
`,
			want: `s.yaml:6: the WCETs on cpu0 in epoch "f" add up to 5ms, more than its frame of 4ms (a 3ms, b 2ms); lower them, move runnables to other resources or lengthen the period
s.yaml:8: the longest dependency chain in epoch "g" takes 5ms, more than its frame of 4ms (x 3ms -> y 2ms); lower these WCETs, break the chain or lengthen the period`,
		},
		// Regressions of the stm trial.
		{
			// Two WCETs whose sum passes the longest duration wrapped to a
			// negative load, and the plan compiled with negative ends.
			name: "WCET sum past the longest duration",
			src: `hyperepochs:
  - {name: h, period: 24h, resources: [cpu0], epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 2000000h}
  - {name: b, client: c, resource: cpu0, wcet: 2000000h}
`,
			want: `s.yaml:2: the WCETs on cpu0 in epoch "f" add up to more than 2562047h47m16.854775807s (the longest duration), more than its frame of 24h0m0s (a 2000000h0m0s, b 2000000h0m0s); lower them, move runnables to other resources or lengthen the period
s.yaml:2: the longest dependency chain in epoch "f" takes 2000000h0m0s, more than its frame of 24h0m0s (a 2000000h0m0s); lower these WCETs, break the chain or lengthen the period`,
		},
		{
			name: "dependency chain past the longest duration",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0, cpu1], epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 2562047h}
  - {name: b, client: c, resource: cpu1, wcet: 2562047h, deps: [a]}
`,
			want: `s.yaml:2: the WCETs on cpu0 in epoch "f" add up to 2562047h0m0s, more than its frame of 10ms (a 2562047h0m0s); lower them, move runnables to other resources or lengthen the period
s.yaml:2: the WCETs on cpu1 in epoch "f" add up to 2562047h0m0s, more than its frame of 10ms (b 2562047h0m0s); lower them, move runnables to other resources or lengthen the period
s.yaml:2: the longest dependency chain in epoch "f" takes more than 2562047h47m16.854775807s (the longest duration), more than its frame of 10ms (a 2562047h0m0s -> b 2562047h0m0s); lower these WCETs, break the chain or lengthen the period`,
		},
		{
			// It said the other epochs took the whole period.
			name: "frames shorter than 1ns",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f, frames: 100000000}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ns}
`,
			want: `s.yaml:2: epoch "f" gets frames of 0ns: the 10ms left of the period of "h", shared among 100000000 frames, is less than 1ns a frame; give fewer frames or a longer period`,
		},
		{
			// The dependencies were checked only once the clients and
			// resources were right.
			name: "deps checked beside client and resource problems",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: a, client: x, resource: cpu0, wcet: 1ms}
  - {name: b, client: c, resource: cpu9, wcet: 1ms, deps: [a, a, z]}
  - {name: d, client: c, resource: cpu0, epoch: nope, wcet: 1ms, deps: [b]}
`,
			want: `s.yaml:5: runnable "a" names client "x", which is not in clients (c); add it there or fix the name
s.yaml:6: runnable "b" runs on resource "cpu9", which no hyperepoch lists; add it to the resources of "h"
s.yaml:6: runnable "b" lists "a" twice in deps; list it once
s.yaml:6: runnable "b" depends on "z", which is not a runnable
s.yaml:7: runnable "d" names epoch "nope", which no hyperepoch has; the epochs are f`,
		},
		{
			// Each problem of one key is on the key's line, not the
			// runnable's (block style).
			name: "block style names the key's line",
			src: `hyperepochs:
  - name: h
    period: 10ms
    resources:
      - cpu0
      - cpu1
    epochs: [{name: f}]
clients: [c]
runnables:
  - name: a
    client: x
    resource: cpu0
    wcet: 1ms
  - name: b
    client: c
    resource: cpu7
    wcet: 1ms
    deps: [a, zz]
  - name: k
    client: c
    resource: cpu0
    wcet: 1ms
    submitter: nobody
`,
			want: `s.yaml:11: runnable "a" names client "x", which is not in clients (c); add it there or fix the name
s.yaml:16: runnable "b" runs on resource "cpu7", which no hyperepoch lists; add it to the resources of "h"
s.yaml:18: runnable "b" depends on "zz", which is not a runnable
s.yaml:23: runnable "k" has a submitter but runs on the CPU core "cpu0"; only a GPU stream runnable (gpuN.streamM) has a submitter: move it to a stream or drop submitter
s.yaml:23: runnable "k" names submitter "nobody", which is not a runnable`,
		},
		{
			// A problem of one dependency of a block-style list is on
			// the item's own line, not the deps: line; in a flow-style
			// list, on the deps: line.
			name: "block-style deps name the item's line",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0, cpu1], epochs: [{name: f}, {name: g}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, epoch: f, wcet: 1ms}
  - {name: e, client: c, resource: cpu1, epoch: g, wcet: 1ms}
  - name: b
    client: c
    resource: cpu1
    epoch: f
    wcet: 1ms
    deps:
      - a
      - grap
      - a
      - b
      - e
  - name: d
    client: c
    resource: cpu0
    epoch: f
    wcet: 1ms
    deps: [a, zz]
`,
			want: `s.yaml:14: runnable "b" depends on "grap", which is not a runnable
s.yaml:15: runnable "b" lists "a" twice in deps; list it once
s.yaml:16: runnable "b" depends on itself; remove it from its deps
s.yaml:17: runnable "b" (epoch "f") depends on "e" of epoch "g"; dependencies stay inside an epoch: move one of them
s.yaml:23: runnable "d" depends on "zz", which is not a runnable`,
		},
		{
			name: "block style names the resources' line",
			src: `hyperepochs:
  - name: h
    period: 10ms
    resources:
      - cpu0
      - cpux
    epochs: [{name: f}]
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ms}
`,
			want: `s.yaml:4: resource "cpux" is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0)`,
		},
	})
}

// TestVerifyIsCompile: Verify reports what Compile does.
// headC is head with client c only: a schedule whose runnables are all
// c's, which compiles (d would have no runnables).
var headC = strings.Replace(head, "clients: [c, d]", "clients: [c]", 1)

func TestVerifyIsCompile(t *testing.T) {
	spec, err := static.Parse([]byte(head+"  - {name: a, client: c, resource: cpu0, wcet: 1ms, deps: [a]}\n"), "s.yaml")
	require.NoError(t, err)
	_, cerr := static.Compile(spec)
	verr := static.Verify(spec)
	require.Error(t, verr)
	assert.Equal(t, cerr.Error(), verr.Error())

	spec, err = static.Parse([]byte(headC+"  - {name: a, client: c, resource: cpu0, wcet: 1ms}\n"), "s.yaml")
	require.NoError(t, err)
	assert.NoError(t, static.Verify(spec))
}

// pipelinePlan compiles testdata/pipeline.yaml.
func pipelinePlan(t *testing.T) *static.Plan {
	t.Helper()
	src, err := os.ReadFile("testdata/pipeline.yaml")
	require.NoError(t, err)
	spec, err := static.Parse(src, "pipeline.yaml")
	require.NoError(t, err)
	plan, err := static.Compile(spec)
	require.NoError(t, err)
	return plan
}

// TestCompilePipeline: the example's placement, worked out by hand: grab,
// then its submitter, then detect on the GPU, then plan; slack is what
// each may overrun before it delays plan past the frame's end.
func TestCompilePipeline(t *testing.T) {
	plan := pipelinePlan(t)
	ms := time.Millisecond
	us := time.Microsecond
	assert.Equal(t, "pz-stm", plan.Format)
	assert.Equal(t, static.PlanVersion, plan.Version)
	assert.Equal(t, "pipeline.yaml", plan.Source)
	assert.Equal(t, static.DefaultSpin, plan.Spin)
	assert.Equal(t, []string{"camera", "planner"}, plan.Clients)
	assert.Len(t, plan.Hash, 16)
	require.Len(t, plan.Hyperepochs, 1)
	h := plan.Hyperepochs[0]
	assert.Equal(t, []static.PlanResource{
		{Name: "cpu0", Kind: static.CPU, Index: 0},
		{Name: "cpu1", Kind: static.CPU, Index: 1},
		{Name: "gpu0.stream0", Kind: static.GPU, Index: 0, Stream: 0},
	}, h.Resources)
	require.Len(t, h.Epochs, 1)
	e := h.Epochs[0]
	assert.Equal(t, 10*ms, e.Period)
	assert.Zero(t, e.Offset)
	assert.Equal(t, []static.PlanRunnable{
		{Name: "grab", Client: "camera", Resource: "cpu0", Start: 0, WCET: ms, Slack: 3900 * us, Overrun: static.FrameSkip, Line: 11},
		{Name: "detect_submit", Client: "camera", Resource: "cpu1", Start: ms, WCET: 100 * us, Slack: 3900 * us, Deps: []string{"grab"}, Submittees: []string{"detect"}, Overrun: static.FrameSkip, Line: 13},
		{Name: "detect", Client: "camera", Resource: "gpu0.stream0", Start: 1100 * us, WCET: 3 * ms, Slack: 3900 * us, Submitter: "detect_submit", Overrun: static.FrameSkip, Line: 12},
		{Name: "plan", Client: "planner", Resource: "cpu0", Start: 4100 * us, WCET: 2 * ms, Slack: 3900 * us, Deps: []string{"detect"}, Overrun: static.FrameSkip, Line: 14},
	}, e.Runnables)
	assert.Len(t, plan.Runnables(), 4)
	for _, r := range plan.Runnables() {
		assert.Zero(t, r.Hyperepoch)
		assert.Zero(t, r.Epoch)
	}
}

// TestCompileUsesGaps: a runnable goes into the earliest gap on its
// resource that fits it, even before runnables placed earlier.
func TestCompileUsesGaps(t *testing.T) {
	spec, err := static.Parse([]byte(headC+`  - {name: a, client: c, resource: cpu0, wcet: 2ms}
  - {name: b, client: c, resource: cpu1, wcet: 1ms, deps: [a]}
  - {name: late, client: c, resource: cpu0, wcet: 3ms, deps: [b]}
  - {name: filler, client: c, resource: cpu0, wcet: 1ms}
`), "s.yaml")
	require.NoError(t, err)
	plan, err := static.Compile(spec)
	require.NoError(t, err)
	start := map[string]time.Duration{}
	for _, r := range plan.Runnables() {
		start[r.Name] = r.Start
	}
	ms := time.Millisecond
	assert.Equal(t, map[string]time.Duration{"a": 0, "b": 2 * ms, "late": 3 * ms, "filler": 2 * ms}, start)
}

// TestPlanRoundTrip: a plan reads back as written; ReadPlan refuses one
// edited by hand, one with unknown fields, one of another format and one
// that is not JSON, wrapping ErrPlan.
func TestPlanRoundTrip(t *testing.T) {
	plan := pipelinePlan(t)
	var buf bytes.Buffer
	require.NoError(t, static.WritePlan(&buf, plan))
	text := buf.String()
	got, err := static.ReadPlan(strings.NewReader(text))
	require.NoError(t, err)
	assert.Equal(t, plan, got)

	bad := map[string]struct{ text, msg string }{
		"edited": {
			text: strings.Replace(text, `"start_ns": 4100000`, `"start_ns": 4200000`, 1),
			msg:  "static: bad plan: hash " + plan.Hash + " does not match its content (",
		},
		"unknown field": {
			text: strings.Replace(text, `"format": "pz-stm",`, `"format": "pz-stm", "extra": 1,`, 1),
			msg:  `static: bad plan: json: unknown field "extra" (compile the schedule with pzrun stm compile)`,
		},
		"other version": {
			text: strings.Replace(text, `"version": 1,`, `"version": 2,`, 1),
			msg:  `static: bad plan: format "pz-stm" version 2, want pz-stm version 1: compile the schedule again`,
		},
		"not JSON": {
			text: "schedule: yes\n",
			msg:  `static: bad plan: invalid character 's' looking for beginning of value (compile the schedule with pzrun stm compile)`,
		},
	}
	for name, b := range bad {
		t.Run(name, func(t *testing.T) {
			require.NotEqual(t, text, b.text, "the edit applies")
			_, err := static.ReadPlan(strings.NewReader(b.text))
			require.Error(t, err)
			assert.True(t, errors.Is(err, static.ErrPlan))
			assert.True(t, strings.HasPrefix(err.Error(), b.msg), "got %q", err.Error())
		})
	}
}

// TestTimelinePipeline: the text timeline of the example.
func TestTimelinePipeline(t *testing.T) {
	plan := pipelinePlan(t)
	var buf bytes.Buffer
	require.NoError(t, static.WriteTimeline(&buf, plan))
	want := `schedule pipeline.yaml (plan ` + plan.Hash + `)

hyperepoch main: period 10ms on cpu0, cpu1, gpu0.stream0
  epoch frame: 1 frame(s) of 10ms from 0
    start  end    deadline  slack  resource      client   runnable
    0      1ms    4.9ms     3.9ms  cpu0          camera   grab
    1ms    1.1ms  5ms       3.9ms  cpu1          camera   detect_submit
    1.1ms  4.1ms  8ms       3.9ms  gpu0.stream0  camera   detect (submitted by detect_submit)
    4.1ms  6.1ms  10ms      3.9ms  cpu0          planner  plan
  load over the period:
    cpu0          3ms    30%
    cpu1          100µs  1%
    gpu0.stream0  3ms    30%
`
	assert.Equal(t, want, trimLines(buf.String()))
}

// trimLines drops the spaces that tabwriter leaves at the ends of lines.
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// A genSched is a random schedule as the generator built it, with what
// the property test needs to know of it.
type genSched struct {
	src    string
	epochs []genEpoch // all of them, in hyperepoch order
}

type genEpoch struct {
	name   string
	period time.Duration // one frame's, as Compile resolves it
	nodes  []*genNode    // in a topological order: deps point back
}

type genNode struct {
	name, client, resource string
	gpu                    bool
	wcet                   time.Duration
	deps                   []int // indices into the epoch's nodes, lower
	submitter              int   // index of the submitter; -1 for none
}

// genSchedule writes a random schedule with rnd: 1-3 hyperepochs, each
// with 1-6 cores, 0-2 GPU streams and 1-3 epochs; per epoch a random
// DAG of CPU runnables and GPU runnables submitted by one of them and
// waited on by a later one. WCETs are drawn so that most epochs fit their
// frame; some do not.
func genSchedule(rnd *rand.Rand) genSched {
	var g genSched
	var b strings.Builder
	nh := 1 + rnd.IntN(3)
	nclients := 1 + rnd.IntN(3)
	cpu, gpu := 0, 0
	type hyper struct {
		cpus, gpus []string
		epochs     []int // indices into g.epochs
	}
	hypers := make([]hyper, nh)
	b.WriteString("# generated\nhyperepochs:\n")
	for hi := range hypers {
		h := &hypers[hi]
		for range 1 + rnd.IntN(6) {
			h.cpus = append(h.cpus, fmt.Sprintf("cpu%d", cpu))
			cpu++
		}
		for s := range rnd.IntN(3) {
			h.gpus = append(h.gpus, fmt.Sprintf("gpu%d.stream%d", gpu, s))
		}
		gpu++
		// Frame periods in µs; epochs without a period share what the
		// others leave, all alike so that they get exactly fp.
		ne := 1 + rnd.IntN(3)
		shared := time.Duration(1000+rnd.IntN(4000)) * time.Microsecond
		var total time.Duration
		var lines []string
		anyShared := false
		for range ne {
			e := genEpoch{name: fmt.Sprintf("e%d", len(g.epochs))}
			frames := 1 + rnd.IntN(3)
			line := fmt.Sprintf("      - {name: %s", e.name)
			if frames > 1 || rnd.IntN(2) == 0 {
				line += fmt.Sprintf(", frames: %d", frames)
			}
			if rnd.IntN(3) == 0 {
				e.period = shared
				anyShared = true
			} else {
				e.period = time.Duration(1000+rnd.IntN(4000)) * time.Microsecond
				line += ", period: " + e.period.String()
			}
			total += time.Duration(frames) * e.period
			lines = append(lines, line+"}")
			h.epochs = append(h.epochs, len(g.epochs))
			g.epochs = append(g.epochs, e)
		}
		if !anyShared {
			total += time.Duration(rnd.IntN(3)) * time.Millisecond
		}
		fmt.Fprintf(&b, "  - name: h%d\n    period: %s\n    resources: [%s]\n    epochs:\n%s\n",
			hi, total, strings.Join(append(slices.Clone(h.cpus), h.gpus...), ", "), strings.Join(lines, "\n"))
	}
	single := len(g.epochs) == 1
	var out []string
	for _, h := range hypers {
		for _, ei := range h.epochs {
			e := &g.epochs[ei]
			n := 1 + rnd.IntN(8)
			// Most epochs: the runnables' WCETs add up to at most the
			// frame, so every bound holds; some: up to 3 times that.
			scale := time.Duration(1)
			if rnd.IntN(8) == 0 {
				scale = 3
			}
			wcet := func() time.Duration {
				most := scale * e.period / time.Duration(n+2)
				return time.Duration(1 + rnd.Int64N(int64(most)))
			}
			for range n {
				k := len(e.nodes)
				nd := &genNode{
					name:      fmt.Sprintf("r%d_%d", ei, k),
					client:    fmt.Sprintf("c%d", rnd.IntN(nclients)),
					resource:  h.cpus[rnd.IntN(len(h.cpus))],
					wcet:      wcet(),
					submitter: -1,
				}
				for j := range k {
					if rnd.IntN(4) == 0 {
						nd.deps = append(nd.deps, j)
					}
				}
				e.nodes = append(e.nodes, nd)
				// Now and then a GPU runnable that this one submits.
				if len(h.gpus) > 0 && rnd.IntN(3) == 0 {
					gn := &genNode{
						name:      fmt.Sprintf("r%d_%d", ei, k+1),
						client:    nd.client,
						resource:  h.gpus[rnd.IntN(len(h.gpus))],
						gpu:       true,
						wcet:      wcet(),
						submitter: k,
					}
					for j := range k {
						if rnd.IntN(6) == 0 {
							gn.deps = append(gn.deps, j)
						}
					}
					e.nodes = append(e.nodes, gn)
				}
			}
			// Every submittee gets a waiter after it.
			for k, nd := range e.nodes {
				if !nd.gpu || slices.ContainsFunc(e.nodes[k+1:], func(m *genNode) bool { return slices.Contains(m.deps, k) }) {
					continue
				}
				var later []int
				for j := k + 1; j < len(e.nodes); j++ {
					if !e.nodes[j].gpu {
						later = append(later, j)
					}
				}
				if len(later) > 0 {
					w := e.nodes[later[rnd.IntN(len(later))]]
					w.deps = append(w.deps, k)
					continue
				}
				e.nodes = append(e.nodes, &genNode{
					name: fmt.Sprintf("r%d_%d", ei, len(e.nodes)), client: nd.client,
					resource: h.cpus[rnd.IntN(len(h.cpus))], wcet: wcet(), deps: []int{k}, submitter: -1,
				})
			}
			for _, nd := range e.nodes {
				line := fmt.Sprintf("  - {name: %s, client: %s, resource: %s, wcet: %s", nd.name, nd.client, nd.resource, nd.wcet)
				if !single || rnd.IntN(2) == 0 {
					line += ", epoch: " + e.name
				}
				if len(nd.deps) > 0 {
					var names []string
					for _, d := range nd.deps {
						names = append(names, e.nodes[d].name)
					}
					rnd.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
					line += ", deps: [" + strings.Join(names, ", ") + "]"
				}
				if nd.submitter >= 0 {
					line += ", submitter: " + e.nodes[nd.submitter].name
				}
				switch rnd.IntN(10) {
				case 0:
					line += ", overrun: noskip"
				case 1:
					line += ", timeout: 1ms"
				}
				out = append(out, line+"}")
			}
		}
	}
	// Source order is not a topological order.
	rnd.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	// The clients that got a runnable (one without is refused).
	used := map[string]bool{}
	for _, e := range g.epochs {
		for _, nd := range e.nodes {
			used[nd.client] = true
		}
	}
	var clients []string
	for c := range nclients {
		if name := fmt.Sprintf("c%d", c); used[name] {
			clients = append(clients, name)
		}
	}
	b.WriteString("clients: [" + strings.Join(clients, ", ") + "]\nrunnables:\n")
	b.WriteString(strings.Join(out, "\n") + "\n")
	if rnd.IntN(4) == 0 {
		b.WriteString("overrun: noskip\n")
	}
	if rnd.IntN(4) == 0 {
		b.WriteString("spin: 20us\n")
	}
	g.src = b.String()
	return g
}

// bounds returns an epoch's lower bounds on any placement's makespan:
// the largest load of a resource, and the longest chain, found by
// walking every path.
func (e genEpoch) bounds() (load, chain time.Duration) {
	loads := map[string]time.Duration{}
	for _, nd := range e.nodes {
		loads[nd.resource] += nd.wcet
		load = max(load, loads[nd.resource])
	}
	preds := func(nd *genNode) []int {
		if nd.submitter >= 0 {
			return append(slices.Clone(nd.deps), nd.submitter)
		}
		return nd.deps
	}
	var walk func(k int, sum time.Duration)
	walk = func(k int, sum time.Duration) {
		sum += e.nodes[k].wcet
		chain = max(chain, sum)
		for _, p := range preds(e.nodes[k]) {
			walk(p, sum)
		}
	}
	for k := range e.nodes {
		walk(k, 0)
	}
	return load, chain
}

// TestCompileRandomDAGs compiles random schedules and checks every plan:
// dependencies and submitters end before their successors start, no two
// runnables of an epoch overlap on a resource, each ends in its frame
// with its slack, the makespan is at least the brute-force lower bound,
// compiling is deterministic and the plan survives WritePlan/ReadPlan
// but not an edit. A schedule that does not compile must be refused for
// its time only (the generator writes no other mistake), with lines.
func TestCompileRandomDAGs(t *testing.T) {
	const seeds = 200
	ok := 0
	for seed := range uint64(seeds) {
		rnd := rand.New(rand.NewPCG(seed, 0x5ced))
		g := genSchedule(rnd)
		if !t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			spec, err := static.Parse([]byte(g.src), "gen.yaml")
			require.NoError(t, err, "source:\n%s", g.src)
			plan, err := static.Compile(spec)
			if err != nil {
				checkRefusal(t, g, err)
				return
			}
			ok++
			checkPlan(t, g, plan)
		}) {
			t.Logf("seed %d, source:\n%s", seed, g.src)
		}
	}
	// The generator must mostly write schedules that fit, or the checks
	// above check little.
	assert.Greater(t, ok, seeds/2, "schedules that compiled")
	t.Logf("%d of %d random schedules compiled", ok, seeds)
}

// checkRefusal: a generated schedule is refused only for time, with every
// error at a line; where a bound is broken its message says so.
func checkRefusal(t *testing.T, g genSched, err error) {
	var list static.ErrorList
	require.ErrorAs(t, err, &list)
	require.NotEmpty(t, list)
	for _, e := range list {
		assert.Positive(t, e.Line, "%s", e)
		assert.Equal(t, "gen.yaml", e.File)
		assert.Regexp(t, `^(the WCETs on \S+ in epoch "e\d+" add up to|the longest dependency chain in epoch "e\d+" takes|epoch "e\d+" does not fit its frame)`, e.Msg)
	}
	text := err.Error()
	for _, e := range g.epochs {
		load, chain := e.bounds()
		if load > e.period {
			assert.Contains(t, text, fmt.Sprintf("in epoch %q add up to %s", e.name, load))
		}
		if chain > e.period {
			assert.Contains(t, text, fmt.Sprintf("chain in epoch %q takes %s", e.name, chain))
		}
		if load <= e.period && chain <= e.period {
			assert.NotContains(t, text, fmt.Sprintf("epoch %q add up", e.name))
			assert.NotContains(t, text, fmt.Sprintf("epoch %q takes", e.name))
		}
	}
}

// checkPlan checks a compiled plan against the schedule it came from.
func checkPlan(t *testing.T, g genSched, plan *static.Plan) {
	byName := map[string]static.PlanEpoch{}
	for _, h := range plan.Hyperepochs {
		var offset time.Duration
		for _, e := range h.Epochs {
			byName[e.Name] = e
			assert.Equal(t, offset, e.Offset, "epoch %s", e.Name)
			offset += time.Duration(e.Frames) * e.Period
		}
		assert.LessOrEqual(t, offset, h.Period, "hyperepoch %s: epochs within its period", h.Name)
	}
	for _, ge := range g.epochs {
		pe, found := byName[ge.name]
		require.True(t, found, "epoch %s in the plan", ge.name)
		require.Equal(t, ge.period, pe.Period, "epoch %s", ge.name)
		require.Len(t, pe.Runnables, len(ge.nodes), "epoch %s", ge.name)
		at := map[string]static.PlanRunnable{}
		for i, r := range pe.Runnables {
			at[r.Name] = r
			if i > 0 {
				p := pe.Runnables[i-1]
				assert.True(t, p.Start < r.Start || p.Start == r.Start && p.Resource < r.Resource, "sorted by start, then resource")
			}
		}
		var makespan time.Duration
		for _, nd := range ge.nodes {
			r, found := at[nd.name]
			require.True(t, found, "runnable %s in epoch %s", nd.name, ge.name)
			assert.Equal(t, nd.wcet, r.WCET)
			assert.Equal(t, nd.resource, r.Resource)
			assert.Equal(t, nd.client, r.Client)
			assert.GreaterOrEqual(t, r.Start, time.Duration(0), "%s", nd.name)
			assert.LessOrEqual(t, r.End(), pe.Period, "%s ends in its frame", nd.name)
			assert.GreaterOrEqual(t, r.Slack, time.Duration(0), "%s", nd.name)
			assert.LessOrEqual(t, r.Deadline(), pe.Period, "%s's deadline in its frame", nd.name)
			assert.Positive(t, r.Line)
			makespan = max(makespan, r.End())
			preds := slices.Clone(nd.deps)
			if nd.submitter >= 0 {
				preds = append(preds, nd.submitter)
				assert.Equal(t, ge.nodes[nd.submitter].name, r.Submitter)
				assert.Contains(t, at[r.Submitter].Submittees, nd.name)
			}
			for _, p := range preds {
				d := at[ge.nodes[p].name]
				assert.LessOrEqual(t, d.End(), r.Start, "%s ends before %s starts", d.Name, r.Name)
				// Ending at its deadline, a predecessor still ends before
				// the latest start of its successor.
				assert.LessOrEqual(t, d.Deadline(), r.Start+r.Slack, "%s's deadline before %s's latest start", d.Name, r.Name)
			}
		}
		// No overlap on a resource, and slack that does not push the next
		// one on the resource past its latest start.
		byRes := map[string][]static.PlanRunnable{}
		for _, r := range pe.Runnables {
			byRes[r.Resource] = append(byRes[r.Resource], r)
		}
		for res, rs := range byRes {
			slices.SortFunc(rs, func(a, b static.PlanRunnable) int { return cmp.Compare(a.Start, b.Start) })
			for i := 1; i < len(rs); i++ {
				assert.LessOrEqual(t, rs[i-1].End(), rs[i].Start, "%s: %s and %s overlap", res, rs[i-1].Name, rs[i].Name)
				assert.LessOrEqual(t, rs[i-1].Deadline(), rs[i].Start+rs[i].Slack, "%s: %s's deadline", res, rs[i-1].Name)
			}
		}
		load, chain := ge.bounds()
		assert.GreaterOrEqual(t, makespan, max(load, chain), "epoch %s: makespan below the lower bound", ge.name)
	}

	// Deterministic: parsing and compiling again gives the same plan.
	spec, err := static.Parse([]byte(g.src), "gen.yaml")
	require.NoError(t, err)
	again, err := static.Compile(spec)
	require.NoError(t, err)
	require.Equal(t, plan, again)
	require.Equal(t, plan.Hash, again.Hash)

	// The plan round-trips, and is refused edited or with a field more.
	var buf bytes.Buffer
	require.NoError(t, static.WritePlan(&buf, plan))
	text := buf.String()
	back, err := static.ReadPlan(strings.NewReader(text))
	require.NoError(t, err)
	require.Equal(t, plan, back)

	r := plan.Hyperepochs[0].Epochs[0].Runnables[0]
	old := fmt.Sprintf("\"wcet_ns\": %d,", int64(r.WCET))
	require.Contains(t, text, old)
	edited := strings.Replace(text, old, fmt.Sprintf("\"wcet_ns\": %d,", int64(r.WCET)+1), 1)
	_, err = static.ReadPlan(strings.NewReader(edited))
	require.ErrorIs(t, err, static.ErrPlan)
	assert.Contains(t, err.Error(), "does not match its content")

	unknown := strings.Replace(text, `"clients": [`, `"master": "x", "clients": [`, 1)
	require.NotEqual(t, text, unknown)
	_, err = static.ReadPlan(strings.NewReader(unknown))
	require.ErrorIs(t, err, static.ErrPlan)
	assert.Contains(t, err.Error(), `unknown field "master"`)
}

// TestWriteSVG: the chart is well-formed XML with one bar per run of a
// runnable: each runnable once per frame of its epoch, on its resource's
// row, in every period of its hyperepoch over the chart (the longest
// period: side's 5 ms period four times in 20 ms).
func TestWriteSVG(t *testing.T) {
	spec, err := static.Parse([]byte(`hyperepochs:
  - name: main
    period: 20ms
    resources: [cpu0, cpu1, gpu0.stream0]
    epochs:
      - {name: fast, frames: 3, period: 4ms}
      - {name: slow}
  - {name: side, period: 5ms, resources: [cpu2], epochs: [{name: aux, frames: 2}]}
clients: [cam, "x-ray"]
runnables:
  - {name: grab, client: cam, resource: cpu0, epoch: fast, wcet: 1ms}
  - {name: sub, client: cam, resource: cpu1, epoch: fast, wcet: 100us, deps: [grab]}
  - {name: detect, client: cam, resource: gpu0.stream0, epoch: fast, wcet: 2ms, submitter: sub}
  - {name: use, client: cam, resource: cpu0, epoch: fast, wcet: 500us, deps: [detect]}
  - {name: log, client: x-ray, resource: cpu1, epoch: slow, wcet: 3ms}
  - {name: tick, client: x-ray, resource: cpu2, epoch: aux, wcet: 1ms}
`), "svg.yaml")
	require.NoError(t, err)
	plan, err := static.Compile(spec)
	require.NoError(t, err)
	want := map[string]int{"grab": 3, "sub": 3, "detect": 3, "use": 3, "log": 1, "tick": 2 * 4}

	var buf bytes.Buffer
	require.NoError(t, static.WriteSVG(&buf, plan))
	dec := xml.NewDecoder(&buf)
	var (
		stack []string // open elements
		inBar bool     // in a bar's rect
		title strings.Builder
		bars  = map[string]int{}
		rows  []string // row labels: texts with text-anchor end
		svg   int
	)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "well-formed XML")
		switch tok := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range tok.Attr {
				attr[a.Name.Local] = a.Value
			}
			if tok.Name.Local == "svg" {
				svg++
				assert.Equal(t, "http://www.w3.org/2000/svg", tok.Name.Space)
			}
			// Bars are the rects in the crisp-edged group.
			if tok.Name.Local == "rect" && len(stack) > 0 && stack[len(stack)-1] == "g" {
				inBar = true
				title.Reset()
				w, err := strconv.ParseFloat(attr["width"], 64)
				require.NoError(t, err)
				assert.Positive(t, w)
			}
			stack = append(stack, tok.Name.Local)
		case xml.EndElement:
			require.Equal(t, stack[len(stack)-1], tok.Name.Local)
			stack = stack[:len(stack)-1]
			if tok.Name.Local == "rect" && inBar {
				inBar = false
				name, _, found := strings.Cut(title.String(), " #")
				require.True(t, found, "bar title %q", title.String())
				bars[name]++
			}
		case xml.CharData:
			if inBar && len(stack) > 0 && stack[len(stack)-1] == "title" {
				title.Write(tok)
			}
			if len(stack) > 0 && stack[len(stack)-1] == "text" {
				rows = append(rows, string(tok))
			}
		}
	}
	assert.Empty(t, stack, "every element closed")
	assert.Equal(t, 1, svg)
	assert.Equal(t, want, bars)
	for _, res := range []string{"cpu0", "cpu1", "gpu0.stream0", "cpu2"} {
		assert.Contains(t, rows, res, "a row per resource")
	}
	assert.Contains(t, rows, "svg.yaml: planned longest period of 20ms (plan "+plan.Hash+")")
	assert.Contains(t, rows, "tick: 8 runs, 8.00 ms", "the legend counts the repeated runs")
	assert.Contains(t, rows, "40.0%", "cpu2's load: tick's two 1 ms runs in every 5 ms period")
}

// TestCompileChecksGoSpec: a Spec built in Go gets the checks of form
// that Parse makes of a file (they were skipped: a bogus policy and a
// name with a space compiled), and an epoch's Frames of 0 reads as 1.
func TestCompileChecksGoSpec(t *testing.T) {
	mk := func() *static.Spec {
		return &static.Spec{File: "go",
			Hyperepochs: []static.HyperepochSpec{{Name: "h", Period: time.Millisecond, Resources: []string{"cpu0"}, Epochs: []static.EpochSpec{{Name: "f"}}, Line: 1}},
			Clients:     []static.ClientSpec{{Name: "c", Line: 2}},
			Runnables:   []static.RunnableSpec{{Name: "r", Client: "c", Resource: "cpu0", WCET: 100 * time.Microsecond, Line: 3}},
		}
	}
	s := mk()
	plan, err := static.Compile(s)
	require.NoError(t, err)
	assert.Equal(t, 1, plan.Hyperepochs[0].Epochs[0].Frames, "Frames 0 is 1")
	assert.Equal(t, time.Millisecond, plan.Hyperepochs[0].Epochs[0].Period)
	assert.Equal(t, static.FrameSkip, plan.Hyperepochs[0].Epochs[0].Runnables[0].Overrun)
	assert.Zero(t, s.Hyperepochs[0].Epochs[0].Frames, "Compile leaves the Spec as it was")

	for _, tc := range []struct {
		edit func(*static.Spec)
		want string
	}{
		{func(s *static.Spec) { s.Runnables[0].Overrun = "bogus" }, `go:3: unknown overrun policy "bogus"; use frameskip or noskip`},
		{func(s *static.Spec) { s.Overrun = "later" }, `go:1: unknown overrun policy "later"; use frameskip or noskip`},
		{func(s *static.Spec) { s.Runnables[0].Name = "bad name" }, `go:3: a runnable's name "bad name" has the character ' '; names use ASCII letters and digits, '_', '-' and '.'`},
		{func(s *static.Spec) { s.Clients[0].Name = "" }, `go:2: a client is empty; give it a name`},
		{func(s *static.Spec) { s.Runnables[0].Deps = []string{"x/y"} }, `go:3: a dependency "x/y" has the character '/'`},
		{func(s *static.Spec) { s.Hyperepochs[0].Epochs[0].Frames = -2 }, `go:0: frames must be a whole number of at least 1, got -2`},
		{func(s *static.Spec) { s.Runnables[0].WCET = 0 }, `go:3: the wcet of runnable "r" must be positive, got 0s`},
		{func(s *static.Spec) { s.Runnables[0].Timeout = -time.Second }, `go:3: the timeout of runnable "r" must not be negative, got -1s`},
		{func(s *static.Spec) { s.Hyperepochs[0].Period = 0 }, `go:1: the period of hyperepoch "h" must be positive, got 0s`},
		{func(s *static.Spec) { s.Spin = -time.Microsecond }, `go:1: spin must not be negative, got -1µs`},
	} {
		s := mk()
		tc.edit(s)
		_, err := static.Compile(s)
		require.Error(t, err, tc.want)
		assert.Contains(t, err.Error(), strings.TrimPrefix(tc.want, "go:0: "), tc.want)
		assert.ErrorContains(t, static.Verify(s), strings.TrimPrefix(tc.want, "go:0: "), "Verify is Compile")
	}
}

// TestTimelineNoTrailingSpaces: the text timeline's rows end at their
// last character (the table's last column was padded).
func TestTimelineNoTrailingSpaces(t *testing.T) {
	plan := pipelinePlan(t)
	var b strings.Builder
	require.NoError(t, static.WriteTimeline(&b, plan))
	for i, l := range strings.Split(b.String(), "\n") {
		assert.Equal(t, strings.TrimRight(l, " "), l, "line %d", i+1)
	}
	assert.Contains(t, b.String(), "detect (submitted by detect_submit)\n")
}

// TestWriteSVGCutsAtChartEnd: where a shorter period does not divide the
// longest (20 ms in 50 ms), the chart draws nothing past its end: a run
// that would start after it is left out, one that would end after it is
// cut there; the legend counts the runs drawn with their time inside the
// chart, and the busy column agrees with the text timeline's load over
// the chart (the third 20 ms period was drawn whole, past the axis, and
// counted in the legend and the busy column).
func TestWriteSVGCutsAtChartEnd(t *testing.T) {
	const pipe = `hyperepochs:
  - name: control
    period: 20ms
    resources: [cpu0, gpu0.stream0]
    epochs:
      - {name: sense, frames: 3, period: 5ms}
      - {name: act}
  - {name: hk, period: 50ms, resources: [cpu1], epochs: [{name: slow}]}
clients: [a, b]
runnables:
  - {name: sub, client: a, resource: cpu0, epoch: sense, wcet: 1ms}
  - {name: gpu, client: a, resource: gpu0.stream0, epoch: sense, wcet: 2ms, submitter: sub}
  - {name: use, client: a, resource: cpu0, epoch: sense, wcet: 1ms, deps: [gpu]}
  - {name: plan, client: a, resource: cpu0, epoch: act, wcet: 2ms}
  - {name: log, client: b, resource: cpu1, epoch: slow, wcet: 1ms}
`
	for _, tc := range []struct {
		name, src string
		legend    []string // legend entries
		busy      []string // the busy column, row by row
		timeline  []string // lines of the timeline's load over the chart
	}{
		{
			name: "runs past the end left out",
			src:  pipe,
			// sense: frames at 0, 5, 10, 20, 25, 30, 40, 45 (50 is out);
			// act: at 15 and 35 (55 is out).
			legend:   []string{"gpu: 8 runs, 16.0 ms", "sub: 8 runs, 8.00 ms", "use: 8 runs, 8.00 ms", "plan: 2 runs, 4.00 ms", "log: 1 run, 1.00 ms"},
			busy:     []string{"40.0%", "32.0%", "2.0%"},
			timeline: []string{"cpu0  20ms  40.0%", "gpu0.stream0  16ms  32.0%"},
		},
		{
			name: "a run across the end cut",
			src: `hyperepochs:
  - {name: h, period: 20ms, resources: [cpu0], epochs: [{name: f}]}
  - {name: k, period: 50ms, resources: [cpu1], epochs: [{name: g}]}
clients: [a]
runnables:
  - {name: long, client: a, resource: cpu0, epoch: f, wcet: 15ms}
  - {name: x, client: a, resource: cpu1, epoch: g, wcet: 1ms}
`,
			// 0-15, 20-35 and 40-55 cut to 40-50.
			legend:   []string{"long: 3 runs, 40.0 ms", "x: 1 run, 1.00 ms"},
			busy:     []string{"80.0%", "2.0%"},
			timeline: []string{"cpu0  40ms  80.0%"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := static.Parse([]byte(tc.src), "s.yaml")
			require.NoError(t, err)
			plan, err := static.Compile(spec)
			require.NoError(t, err)
			var buf bytes.Buffer
			require.NoError(t, static.WriteSVG(&buf, plan))
			svg := buf.String()

			axis := regexp.MustCompile(`<line x1="([0-9.]+)" x2="([0-9.]+)" y1="[0-9.]+" y2="[0-9.]+" stroke="#000000"/>`).FindStringSubmatch(svg)
			require.NotNil(t, axis, "the time axis")
			end, err := strconv.ParseFloat(axis[2], 64)
			require.NoError(t, err)
			bars := strings.SplitN(strings.SplitN(svg, `<g shape-rendering="crispEdges">`, 2)[1], "</g>", 2)[0]
			rect := regexp.MustCompile(`<rect[^>]* x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)"`)
			n := 0
			for _, m := range rect.FindAllStringSubmatch(bars, -1) {
				x, _ := strconv.ParseFloat(m[1], 64)
				w, _ := strconv.ParseFloat(m[2], 64)
				assert.LessOrEqual(t, x+w, end+0.01, "a bar ends past the axis: %s", m[0])
				n++
			}
			assert.Positive(t, n)

			texts := map[string]bool{}
			var pct []string
			for _, m := range regexp.MustCompile(`>([^<>]+)</text>`).FindAllStringSubmatch(svg, -1) {
				texts[m[1]] = true
				if strings.HasSuffix(m[1], "%") {
					pct = append(pct, m[1])
				}
			}
			for _, l := range tc.legend {
				assert.True(t, texts[l], "legend %q in %v", l, texts)
			}
			assert.Equal(t, tc.busy, pct, "the busy column")
			assert.True(t, texts["runnable: runs drawn in the chart (one cut at its end counts), planned time inside the chart"], "the legend says what it counts")

			var tl strings.Builder
			require.NoError(t, static.WriteTimeline(&tl, plan))
			text := regexp.MustCompile(` +`).ReplaceAllString(tl.String(), " ")
			assert.Contains(t, text, "load over the 50ms of the -svg chart (2.5 periods, the last one cut at its end), as its busy column shows it:")
			for _, l := range tc.timeline {
				assert.Contains(t, text, strings.ReplaceAll(l, "  ", " "))
			}
		})
	}
}

// Every bar of the plan's chart has its legend swatch's colour (trial
// finding: the chart outlined one frame's longest chain as a critical
// path and paled every other bar, so that most bars matched no swatch and
// pale neighbours, read and fuse, looked alike; in a periodic plan every
// frame repeats that chain, and slack, drawn to each deadline, says what
// is tight).
func TestWriteSVGBarsMatchLegend(t *testing.T) {
	spec, err := static.Parse([]byte(`hyperepochs:
  - name: control
    period: 10ms
    resources: [cpu0, gpu0.stream0]
    epochs:
      - {name: sense, frames: 2, period: 3ms}
      - {name: act}
  - {name: slow, period: 30ms, resources: [cpu1], epochs: [{name: log, frames: 3}]}
clients: [sensor, fusion]
runnables:
  - {name: read, client: sensor, resource: cpu0, epoch: sense, wcet: 500us}
  - {name: prep, client: sensor, resource: cpu0, epoch: sense, wcet: 200us, deps: [read]}
  - {name: infer, client: sensor, resource: gpu0.stream0, epoch: sense, wcet: 1ms, submitter: prep}
  - {name: fuse, client: fusion, resource: cpu0, epoch: sense, wcet: 500us, deps: [infer]}
  - {name: cmd, client: fusion, resource: cpu0, epoch: act, wcet: 1ms}
  - {name: rec, client: fusion, resource: cpu1, epoch: log, wcet: 2ms}
  - {name: flush, client: sensor, resource: cpu1, epoch: log, wcet: 1ms, deps: [rec]}
`), "legend.yaml")
	require.NoError(t, err)
	plan, err := static.Compile(spec)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, static.WriteSVG(&buf, plan))
	svg := buf.String()
	swatch := map[string]string{}
	for _, m := range regexp.MustCompile(`fill="(#[0-9a-f]{6})"/><text [^>]*>([a-z]+): `).FindAllStringSubmatch(svg, -1) {
		swatch[m[2]] = m[1]
	}
	require.Len(t, swatch, 7, "a legend entry per runnable")
	bars := regexp.MustCompile(`fill="(#[0-9a-f]{6})"[^>]*><title>([a-z]+) #`).FindAllStringSubmatch(svg, -1)
	require.NotEmpty(t, bars)
	for _, m := range bars {
		assert.Equal(t, swatch[m[2]], m[1], "a bar of %s", m[2])
	}
}
