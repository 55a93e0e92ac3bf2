package static_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pzgo/pz/scheduler/static"
)

// FuzzParseCompile: whatever the source, Parse and Compile do not panic,
// and every error is an ErrorList of messages naming the file; Compile
// also gets the partial Spec that Parse returns with its errors. A plan
// that compiles can be written, read back and printed.
func FuzzParseCompile(f *testing.F) {
	src, err := os.ReadFile("testdata/pipeline.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(src)
	for _, s := range []string{
		"",
		"hyperepochs: [\n",
		"- a\n- b\n",
		"x: &a [1]\nhyperepochs: *a\nclients: *a\nrunnables: *a\n",
		head + "  - {name: a, client: c, resource: cpu0, wcet: 1ms, deps: [b]}\n  - {name: b, client: c, resource: cpu1, wcet: 1ms, deps: [a]}\n",
		head + "  - {name: s, client: c, resource: cpu0, wcet: 1ms, deps: [w]}\n  - {name: k, client: c, resource: gpu0.stream0, wcet: 1ms, submitter: s}\n  - {name: w, client: c, resource: cpu1, wcet: 1ms, deps: [k]}\n",
		head + "  - {name: a, client: c, resource: cpu0, wcet: 6ms}\n  - {name: b, client: c, resource: cpu0, wcet: 5ms}\n",
		head + "  - {name: k, client: d, resource: gpu0.stream0, wcet: 1ms, submitter: k}\n",
		"hyperepochs:\n  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f, frames: 4611686018427387904, period: 4ns}, {name: g}]}\nclients: [c]\nrunnables:\n  - {name: a, client: c, resource: cpu0, wcet: 1ns, epoch: g}\n",
		"hyperepochs:\n  - {name: h, period: 10, resources: [cpu0, cpu0], epochs: [{name: f, frames: 0}]}\nclients: [c, c]\nrunnables:\n  - {name: a, clinet: c, resource: cpu0, wcet: 0}\noverrun: skip\nspin: -1ms\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		spec, err := static.Parse(src, "fuzz.yaml")
		if err != nil {
			checkErrorList(t, err, false)
		} else if spec == nil {
			t.Fatal("Parse returned neither a Spec nor an error")
		}
		if spec == nil {
			return
		}
		plan, cerr := static.Compile(spec)
		if cerr != nil {
			checkErrorList(t, cerr, true)
			return
		}
		if err != nil {
			return // a partial Spec that happens to compile
		}
		if plan == nil || plan.Hash == "" {
			t.Fatalf("Compile returned no plan and no error")
		}
		checkPlanTimes(t, plan)
		var buf bytes.Buffer
		if err := static.WritePlan(&buf, plan); err != nil {
			t.Fatal(err)
		}
		back, err := static.ReadPlan(&buf)
		if err != nil {
			t.Fatalf("ReadPlan of a plan just written: %v", err)
		}
		if back.Hash != plan.Hash {
			t.Fatalf("hash %s read back as %s", plan.Hash, back.Hash)
		}
		if err := static.WriteTimeline(io.Discard, plan); err != nil {
			t.Fatal(err)
		}
	})
}

// checkErrorList fails unless err is a non-empty ErrorList of *Error
// with messages, naming fuzz.yaml, lines in order; withLine: every line
// is known.
func checkErrorList(t *testing.T, err error, withLine bool) {
	t.Helper()
	var list static.ErrorList
	if !errors.As(err, &list) || len(list) == 0 {
		t.Fatalf("error %T %q is not a non-empty ErrorList", err, err)
	}
	var first *static.Error
	if !errors.As(err, &first) || first != list[0] {
		t.Fatalf("errors.As does not find the first *Error of %q", err)
	}
	for i, e := range list {
		switch {
		case e == nil:
			t.Fatalf("entry %d is nil", i)
		case strings.TrimSpace(e.Msg) == "":
			t.Fatalf("entry %d has no message: %q", i, err)
		case e.File != "fuzz.yaml":
			t.Fatalf("entry %d names file %q", i, e.File)
		case e.Line < 0 || withLine && e.Line == 0:
			t.Fatalf("entry %d has line %d: %q", i, e.Line, e)
		case i > 0 && list[i-1].Line > e.Line:
			t.Fatalf("entries out of line order: %q", err)
		}
	}
}

// checkPlanTimes fails unless each hyperepoch's epochs follow one another
// inside its period (frames × period computed without overflow) and
// each runnable runs, with its slack, inside its frame.
func checkPlanTimes(t *testing.T, plan *static.Plan) {
	t.Helper()
	for _, h := range plan.Hyperepochs {
		var offset time.Duration
		for _, e := range h.Epochs {
			if e.Offset != offset || e.Period <= 0 || e.Frames < 1 || time.Duration(e.Frames) > (h.Period-offset)/e.Period {
				t.Fatalf("hyperepoch %s of %s: epoch %s has %d frames of %s from %s, after %s", h.Name, h.Period, e.Name, e.Frames, e.Period, e.Offset, offset)
			}
			offset += time.Duration(e.Frames) * e.Period
			for _, r := range e.Runnables {
				if r.Start < 0 || r.WCET <= 0 || r.Slack < 0 || r.Deadline() > e.Period {
					t.Fatalf("epoch %s of %s: runnable %s at %s for %s with slack %s", e.Name, e.Period, r.Name, r.Start, r.WCET, r.Slack)
				}
			}
		}
	}
}
