package static

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A Plan is a compiled schedule: every runnable placed at a start offset
// on its resource inside its epoch's frame. It is what the master and
// the clients run, written as JSON by WritePlan (the .stm file).
type Plan struct {
	// Format is always "pz-stm"; Version is PlanVersion.
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Source is the schedule file the plan was compiled from.
	Source string `json:"source"`
	// Hash identifies the plan: clients and master refuse to run together
	// on different plans.
	Hash string `json:"hash"`
	// Spin is how long before a planned start a thread spins.
	Spin        time.Duration    `json:"spin_ns"`
	Clients     []string         `json:"clients"`
	Hyperepochs []PlanHyperepoch `json:"hyperepochs"`
}

// PlanVersion is the version of the plan format this package writes.
const PlanVersion = 1

// A PlanHyperepoch is a compiled hyperepoch.
type PlanHyperepoch struct {
	Name      string         `json:"name"`
	Period    time.Duration  `json:"period_ns"`
	Resources []PlanResource `json:"resources"`
	Epochs    []PlanEpoch    `json:"epochs"`
}

// A PlanResource is a CPU core or a GPU stream.
type PlanResource struct {
	Name string       `json:"name"`
	Kind ResourceKind `json:"kind"`
	// Index is the core's number for a CPU, the device's for a GPU.
	Index int `json:"index"`
	// Stream is the stream's number on its GPU.
	Stream int `json:"stream,omitempty"`
}

// A ResourceKind tells CPU cores from GPU streams.
type ResourceKind string

// The resource kinds.
const (
	CPU ResourceKind = "cpu"
	GPU ResourceKind = "gpu"
)

// A PlanEpoch is a compiled epoch: it starts at Offset into its
// hyperepoch's period and runs Frames frames of Period each.
type PlanEpoch struct {
	Name   string        `json:"name"`
	Frames int           `json:"frames"`
	Period time.Duration `json:"period_ns"`
	Offset time.Duration `json:"offset_ns"`
	// Runnables are sorted by start, then resource.
	Runnables []PlanRunnable `json:"runnables"`
}

// A PlanRunnable is a placed runnable. Its deadline is Start+WCET+Slack
// into its frame.
type PlanRunnable struct {
	Name     string        `json:"name"`
	Client   string        `json:"client"`
	Resource string        `json:"resource"`
	Start    time.Duration `json:"start_ns"`
	WCET     time.Duration `json:"wcet_ns"`
	// Slack is how much later it may end without delaying anything past
	// the end of its frame.
	Slack     time.Duration `json:"slack_ns"`
	Deps      []string      `json:"deps,omitempty"`
	Submitter string        `json:"submitter,omitempty"`
	// Submittees are the GPU runnables this one enqueues.
	Submittees []string      `json:"submittees,omitempty"`
	Overrun    Policy        `json:"overrun"`
	Timeout    time.Duration `json:"timeout_ns,omitempty"`
	Line       int           `json:"line"`
}

// End is the runnable's planned end into its frame.
func (r PlanRunnable) End() time.Duration { return r.Start + r.WCET }

// Deadline is the latest end into its frame that delays nothing.
func (r PlanRunnable) Deadline() time.Duration { return r.Start + r.WCET + r.Slack }

// ErrPlan is returned (wrapped) for a plan file that cannot be read.
var ErrPlan = errors.New("static: bad plan")

// WritePlan writes p as indented JSON.
func WritePlan(w io.Writer, p *Plan) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(p)
}

// ReadPlan reads a plan written by WritePlan and checks its hash, so that
// a plan edited by hand is refused: compile the schedule again instead.
func ReadPlan(r io.Reader) (*Plan, error) {
	src, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%w: reading it: %w", ErrPlan, err)
	}
	// The format first: a run record, say, fails the plan's fields
	// otherwise, with "unknown field" rather than what it is.
	var head struct {
		Format string `json:"format"`
	}
	if json.Unmarshal(src, &head) == nil && head.Format == "pz-stm-run" {
		return nil, fmt.Errorf("%w: this is a run record (format pz-stm-run), not a plan: give the schedule's .yaml or the .stm that pzrun stm compile writes, and read the record with pzrun stm analyze", ErrPlan)
	}
	var p Plan
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %v (compile the schedule with pzrun stm compile)", ErrPlan, err)
	}
	if p.Format != "pz-stm" || p.Version != PlanVersion {
		return nil, fmt.Errorf("%w: format %q version %d, want pz-stm version %d: compile the schedule again", ErrPlan, p.Format, p.Version, PlanVersion)
	}
	if h := p.hash(); h != p.Hash {
		return nil, fmt.Errorf("%w: hash %s does not match its content (%s): it was edited; compile the schedule again", ErrPlan, p.Hash, h)
	}
	return &p, nil
}

// hash is the plan's content hash, computed with Hash empty.
func (p *Plan) hash() string {
	c := *p
	c.Hash = ""
	b, _ := json.Marshal(&c) // plain data: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// bodyHash is the plan's hash without its source path: two plans with
// the same bodyHash are one schedule, compiled from paths spelled apart.
func (p *Plan) bodyHash() string {
	c := *p
	c.Source = ""
	return c.hash()
}

// CheckClient returns nil if the plan has a client called name, else an
// error that lists the plan's clients and, for a likely misspelling,
// names the one meant ("the plan has no client "camra"; its clients are
// camera, planner; did you mean "camera"?").
func (p *Plan) CheckClient(name string) error {
	if slices.Contains(p.Clients, name) {
		return nil
	}
	return fmt.Errorf("the plan has no client %q; its clients are %s%s", name, strings.Join(p.Clients, ", "), didYouMean(closest(name, p.Clients)))
}

// Runnables returns every runnable of the plan with its epoch and
// hyperepoch, in plan order.
func (p *Plan) Runnables() []PlacedRunnable {
	var out []PlacedRunnable
	for hi, h := range p.Hyperepochs {
		var per int64
		for _, e := range h.Epochs {
			per += int64(e.Frames)
		}
		var base int64
		for ei, e := range h.Epochs {
			for _, r := range e.Runnables {
				out = append(out, PlacedRunnable{PlanRunnable: r, Hyperepoch: hi, Epoch: ei, FrameBase: base, PeriodFrames: per})
			}
			base += int64(e.Frames)
		}
	}
	return out
}

// A PlacedRunnable is a runnable with the indices of its hyperepoch and
// epoch in the plan, and where its frames fall in the run's frame
// numbering: in period k it runs frames k*PeriodFrames + FrameBase + f,
// for f from 0 to its epoch's Frames-1.
type PlacedRunnable struct {
	PlanRunnable
	Hyperepoch, Epoch int
	// FrameBase is the number of its epoch's first frame within a period;
	// PeriodFrames the frames of one period of its hyperepoch.
	FrameBase, PeriodFrames int64
}

// Verify checks a schedule: its form (as Parse does, for a Spec built in
// Go), names, kinds, dependencies and whether the WCETs fit the periods.
// It is Compile without the plan.
func Verify(s *Spec) error {
	_, err := Compile(s)
	return err
}

// Compile verifies s and places every runnable: list scheduling by
// critical path inside each epoch's frame (the runnable with the longest
// path to the end of the frame first, ties in source order), each at the
// earliest gap on its resource after its dependencies end. The result is
// deterministic. Every problem is reported as an ErrorList naming the
// source line and the fix.
//
// A Spec built in Go is checked for what Parse checks too: names, positive
// periods and WCETs, timeouts and spin not negative, known overrun
// policies. An epoch's Frames of 0 means 1, as a schedule without frames;
// an empty Overrun means FrameSkip. s is not modified.
func Compile(s *Spec) (*Plan, error) {
	if s == nil {
		return nil, errors.New("static: Compile of a nil Spec (make one with Parse)")
	}
	c := &compiler{spec: normalized(s), p: &problems{file: s.File}}
	c.checkForm()
	if err := c.p.err(); err != nil {
		return nil, err
	}
	c.checkStructure()
	if err := c.p.err(); err != nil {
		return nil, err
	}
	c.checkRunnables()
	if err := c.p.err(); err != nil {
		return nil, err
	}
	c.checkCycles()
	if err := c.p.err(); err != nil {
		return nil, err
	}
	plan := c.place()
	if err := c.p.err(); err != nil {
		return nil, err
	}
	c.checkClients()
	if err := c.p.err(); err != nil {
		return nil, err
	}
	plan.Hash = plan.hash()
	return plan, nil
}

// compiler holds the indexes built while checking a spec.
type compiler struct {
	spec *Spec
	p    *problems
	// resources by name: which hyperepoch, and its kind.
	resHyper map[string]int
	resKind  map[string]PlanResource
	// epochs by name: hyperepoch and index; periods resolved.
	epochAt     map[string][2]int
	epochPeriod map[string]time.Duration
	clients     map[string]bool
	// runnables by name, and each runnable's epoch.
	run      map[string]*RunnableSpec
	runEpoch map[string]string
	waited   map[string]bool // GPU runnables some runnable depends on
}

// normalized returns a copy of s with each epoch's Frames of 0 read as
// 1 (the default of a schedule that gives none).
func normalized(s *Spec) *Spec {
	out := *s
	out.Hyperepochs = slices.Clone(s.Hyperepochs)
	for i := range out.Hyperepochs {
		h := &out.Hyperepochs[i]
		h.Epochs = slices.Clone(h.Epochs)
		for j := range h.Epochs {
			if h.Epochs[j].Frames == 0 {
				h.Epochs[j].Frames = 1
			}
		}
	}
	return &out
}

// checkForm checks what Parse checks of each value, with the same
// messages, for a Spec built in Go: Parse has reported these already.
func (c *compiler) checkForm() {
	s, p := c.spec, c.p
	name := func(line int, what, v string) {
		if msg := nameProblem(what, v); msg != "" {
			p.add(line, "%s", msg)
		}
	}
	dur := func(line int, what string, d time.Duration, zeroOK bool) {
		if msg := durationProblem(what, d, d.String(), zeroOK); msg != "" {
			p.add(line, "%s", msg)
		}
	}
	if msg := policyProblem(s.Overrun, true); msg != "" {
		p.add(1, "%s", msg)
	}
	dur(1, "spin", s.Spin, true)
	if s.Spin > MaxPeriod {
		p.add(1, "spin %s is longer than the longest period, %s; spin for a few µs (the default is %s)", s.Spin, fmtMaxPeriod, DefaultSpin)
	}
	for _, h := range s.Hyperepochs {
		name(h.Line, "a hyperepoch's name", h.Name)
		dur(h.Line, "the period of hyperepoch "+strconv.Quote(h.Name), h.Period, false)
		if h.Period > MaxPeriod {
			p.add(h.Line, "the period of hyperepoch %q is %s, longer than the longest a run can keep time over, %s; shorten it (a static schedule repeats every few ms or s)", h.Name, h.Period, fmtMaxPeriod)
		}
		for _, r := range h.Resources {
			name(h.Line, "a resource", r)
		}
		for _, e := range h.Epochs {
			name(e.Line, "an epoch's name", e.Name)
			if e.Frames < 1 {
				p.add(e.Line, "%s, got %d", framesMust, e.Frames)
			}
			dur(e.Line, "the period of epoch "+strconv.Quote(e.Name), e.Period, true)
		}
	}
	for _, cl := range s.Clients {
		name(cl.Line, "a client", cl.Name)
	}
	for _, r := range s.Runnables {
		name(r.Line, "a runnable's name", r.Name)
		of := func(field string) string { return fmt.Sprintf("the %s of runnable %q", field, r.Name) }
		name(r.Line, of("client"), r.Client)
		name(r.Line, of("resource"), r.Resource)
		if r.Epoch != "" {
			name(r.Line, of("epoch"), r.Epoch)
		}
		for _, d := range r.Deps {
			name(r.Line, "a dependency", d)
		}
		if r.Submitter != "" {
			name(r.Line, "a submitter", r.Submitter)
		}
		dur(r.Line, of("wcet"), r.WCET, false)
		dur(r.Line, of("timeout"), r.Timeout, true)
		if msg := policyProblem(r.Overrun, true); msg != "" {
			p.add(r.Line, "%s", msg)
		}
	}
}

func (c *compiler) checkStructure() {
	s, p := c.spec, c.p
	c.resHyper = map[string]int{}
	c.resKind = map[string]PlanResource{}
	c.epochAt = map[string][2]int{}
	c.epochPeriod = map[string]time.Duration{}
	c.clients = map[string]bool{}
	if len(s.Hyperepochs) == 0 {
		p.add(1, "the schedule has no hyperepochs; add one with a period, resources and epochs")
	}
	hyperLine := map[string]int{}
	for hi, h := range s.Hyperepochs {
		if l, dup := hyperLine[h.Name]; dup && h.Name != "" {
			p.add(h.Line, "hyperepoch %q is defined twice (first on line %d); rename one", h.Name, l)
		}
		hyperLine[h.Name] = h.Line
		for _, r := range h.Resources {
			kind, ok := parseResource(r)
			if !ok {
				p.add(h.resLine(), "resource %q %s%s", r, notResource, didYouMean(resourceHint(r, nil)))
				continue
			}
			if other, dup := c.resHyper[r]; dup {
				if other == hi {
					p.add(h.resLine(), "resource %q is listed twice in hyperepoch %q; list it once", r, h.Name)
				} else {
					p.add(h.resLine(), "resource %q is in hyperepochs %q and %q; a resource belongs to one hyperepoch: give each its own resources", r, s.Hyperepochs[other].Name, h.Name)
				}
				continue
			}
			c.resHyper[r] = hi
			c.resKind[r] = kind
		}
		if len(h.Epochs) == 0 {
			p.add(h.Line, "hyperepoch %q has no epochs; add one, e.g. epochs: [{name: frame}]", h.Name)
		}
		var given time.Duration
		unset, saturated := 0, false
		for ei, e := range h.Epochs {
			if at, dup := c.epochAt[e.Name]; dup && e.Name != "" {
				p.add(e.Line, "epoch %q is defined twice (first in hyperepoch %q); epoch names are unique in a schedule", e.Name, s.Hyperepochs[at[0]].Name)
				continue
			}
			c.epochAt[e.Name] = [2]int{hi, ei}
			if e.Period > 0 {
				given = addFrames(given, e.Frames, e.Period)
			} else if e.Frames > 0 && unset > math.MaxInt-e.Frames {
				unset, saturated = math.MaxInt, true // saturate: frames can be huge
			} else {
				unset += e.Frames
			}
		}
		if h.Period <= 0 {
			continue
		}
		if given > h.Period {
			if given == maxDuration { // saturated
				p.add(h.Line, "the epochs of hyperepoch %q (frames × period) take %s, more than its period %s; shorten them or lengthen the period", h.Name, fmtSum(given), h.Period)
			} else {
				p.add(h.Line, "the epochs of hyperepoch %q take %s (frames × period), more than its period %s; shorten them or lengthen the period", h.Name, given, h.Period)
			}
			continue
		}
		for _, e := range h.Epochs {
			d := e.Period
			if d == 0 {
				if unset == 0 {
					continue
				}
				left := h.Period - given
				d = left / time.Duration(unset)
				switch {
				case left <= 0:
					p.add(e.Line, "epoch %q gets no time: the other epochs of %q take all of its period %s; give it a period", e.Name, h.Name, h.Period)
				case d <= 0:
					frames := strconv.Itoa(unset)
					if saturated { // their sum is past the largest int
						frames = "more than " + strconv.Itoa(math.MaxInt)
					}
					p.add(e.Line, "epoch %q gets frames of 0ns: the %s left of the period of %q, shared among %s frames, is less than 1ns a frame; give fewer frames or a longer period", e.Name, left, h.Name, frames)
				}
			}
			c.epochPeriod[e.Name] = d
		}
	}
	clientLine := map[string]int{}
	for _, cl := range s.Clients {
		if l, dup := clientLine[cl.Name]; dup {
			if l == cl.Line { // a flow list, [c, c]
				p.add(cl.Line, "client %q is listed twice on this line; list it once", cl.Name)
			} else {
				p.add(cl.Line, "client %q is listed twice (first on line %d); list it once", cl.Name, l)
			}
		}
		clientLine[cl.Name] = cl.Line
		c.clients[cl.Name] = true
	}
	if len(s.Clients) == 0 {
		p.add(1, "the schedule has no clients; list the programs that run runnables, e.g. clients: [camera]")
	}
	if len(s.Runnables) == 0 {
		p.add(1, "the schedule has no runnables; add some under runnables:")
	}
}

// MaxPeriod is the longest period a hyperepoch may have. A run computes
// its times in int64 nanoseconds of CLOCK_MONOTONIC: the start, the
// start delay (at least the longest period) after the last client
// joined; each period's start, t0 + k × period; a deadline, that plus
// the epoch's offset, the frame and the runnable's deadline (each within
// the period, as the verifier checks); the liveness bound, at least two
// periods. With periods of at most a day these
// stay below the int64 limit (about 292 years) for any run shorter than
// about 290 years, and a day is far beyond what a static schedule
// repeats at (milliseconds to seconds); the master still waits one
// period before the first, so a longer one would not start in practice
// either.
const MaxPeriod = 24 * time.Hour

// fmtMaxPeriod is MaxPeriod as the messages print it.
const fmtMaxPeriod = "24h"

// addFrames returns total + frames×period, saturating at the largest
// Duration instead of wrapping around (frames can be huge).
func addFrames(total time.Duration, frames int, period time.Duration) time.Duration {
	const most = time.Duration(math.MaxInt64)
	if frames > 0 && period > (most-total)/time.Duration(frames) {
		return most
	}
	return total + time.Duration(frames)*period
}

// notResource says what a resource name looks like.
const notResource = "is neither a CPU core (cpuN, e.g. cpu0) nor a GPU stream (gpuN.streamM, e.g. gpu0.stream0)"

// resourceHint suggests a resource name for name, which is none: the
// resource it spells in another case or with leading zeros (CPU0, cpu01:
// cpu0, cpu1), a GPU's first stream for a bare GPU (gpu0: gpu0.stream0),
// else the nearest of listed; "" if none is near.
func resourceHint(name string, listed []string) string {
	num := func(s string) (int, bool) {
		if s == "" || s[0] < '0' || s[0] > '9' {
			return 0, false
		}
		n, err := strconv.Atoi(s)
		return n, err == nil
	}
	low := strings.ToLower(name)
	if rest, ok := strings.CutPrefix(low, "cpu"); ok {
		if n, ok := num(rest); ok {
			return fmt.Sprintf("cpu%d", n)
		}
	}
	if rest, ok := strings.CutPrefix(low, "gpu"); ok {
		dev, stream, hasStream := strings.Cut(rest, ".stream")
		d, okDev := num(dev)
		st, okStream := 0, true
		if hasStream {
			st, okStream = num(stream)
		}
		if okDev && okStream {
			return fmt.Sprintf("gpu%d.stream%d", d, st)
		}
	}
	return closest(name, listed)
}

// didYouMean is "; did you mean "hint"?", or "" without a hint.
func didYouMean(hint string) string {
	if hint == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", hint)
}

// parseResource reads cpuN or gpuN.streamM.
func parseResource(name string) (PlanResource, bool) {
	num := func(s string) (int, bool) {
		if s == "" || len(s) > 1 && s[0] == '0' {
			return 0, false
		}
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 0
	}
	if rest, ok := strings.CutPrefix(name, "cpu"); ok {
		if n, ok := num(rest); ok {
			return PlanResource{Name: name, Kind: CPU, Index: n}, true
		}
	}
	if rest, ok := strings.CutPrefix(name, "gpu"); ok {
		dev, stream, ok := strings.Cut(rest, ".stream")
		if !ok {
			return PlanResource{}, false
		}
		d, ok1 := num(dev)
		st, ok2 := num(stream)
		if ok1 && ok2 {
			return PlanResource{Name: name, Kind: GPU, Index: d, Stream: st}, true
		}
	}
	return PlanResource{}, false
}

func (c *compiler) checkRunnables() {
	s, p := c.spec, c.p
	c.run = map[string]*RunnableSpec{}
	c.runEpoch = map[string]string{}
	c.waited = map[string]bool{}
	var epochs []string
	for _, h := range s.Hyperepochs {
		for _, e := range h.Epochs {
			epochs = append(epochs, e.Name)
		}
	}
	for i := range s.Runnables {
		r := &s.Runnables[i]
		if prev, dup := c.run[r.Name]; dup {
			p.add(r.Line, "runnable %q is defined twice (first on line %d); rename one", r.Name, prev.Line)
			continue
		}
		c.run[r.Name] = r
		if !c.clients[r.Client] {
			p.add(r.at(r.keys.client), "runnable %q names client %q, which is not in clients (%s); add it there or fix the name", r.Name, r.Client, listNames(s.Clients))
		}
		ep := r.Epoch
		if ep == "" {
			if len(epochs) != 1 {
				p.add(r.Line, "runnable %q has no epoch and the schedule has %d; add epoch: one of %s", r.Name, len(epochs), strings.Join(epochs, ", "))
				continue
			}
			ep = epochs[0]
		}
		// An unknown epoch leaves out only what needs it (the resource's
		// hyperepoch); the resource is checked all the same.
		at, epochKnown := c.epochAt[ep]
		if !epochKnown {
			p.add(r.at(r.keys.epoch), "runnable %q names epoch %q, which no hyperepoch has; the epochs are %s", r.Name, ep, strings.Join(epochs, ", "))
		} else {
			c.runEpoch[r.Name] = ep
		}
		var listed []string // the resources of its hyperepoch, if known
		if epochKnown {
			listed = s.Hyperepochs[at[0]].Resources
		}
		kind, known := c.resKind[r.Resource]
		switch {
		case !known:
			// A name that is no resource at all is said first: listing it
			// would only fail.
			if _, ok := parseResource(r.Resource); !ok {
				p.add(r.at(r.keys.resource), "runnable %q runs on %q, which %s%s", r.Name, r.Resource, notResource, didYouMean(resourceHint(r.Resource, listed)))
				continue
			}
			if epochKnown {
				p.add(r.at(r.keys.resource), "runnable %q runs on resource %q, which no hyperepoch lists; add it to the resources of %q", r.Name, r.Resource, s.Hyperepochs[at[0]].Name)
			} else {
				p.add(r.at(r.keys.resource), "runnable %q runs on resource %q, which no hyperepoch lists; add it to the resources of its epoch's hyperepoch", r.Name, r.Resource)
			}
			continue
		case epochKnown && c.resHyper[r.Resource] != at[0]:
			p.add(r.at(r.keys.resource), "runnable %q of epoch %q runs on %q, a resource of hyperepoch %q; use one of %s", r.Name, ep, r.Resource, s.Hyperepochs[c.resHyper[r.Resource]].Name, strings.Join(listed, ", "))
		}
		if kind.Kind == GPU && r.Submitter == "" {
			p.add(r.Line, "runnable %q runs on the GPU stream %q but has no submitter; add submitter: the CPU runnable of client %q that enqueues its work", r.Name, r.Resource, r.Client)
		}
		if kind.Kind == CPU && r.Submitter != "" {
			p.add(r.at(r.keys.submitter), "runnable %q has a submitter but runs on the CPU core %q; only a GPU stream runnable (gpuN.streamM) has a submitter: move it to a stream or drop submitter", r.Name, r.Resource)
		}
	}
	// The dependencies are checked whatever the problems above, so that
	// the stage reports all of them at once; what needs a runnable's
	// epoch or resource is left out where those were wrong.
	for i := range s.Runnables {
		r := &s.Runnables[i]
		seen := map[string]bool{}
		for j, d := range r.Deps {
			dep, ok := c.run[d]
			switch {
			case !ok:
				msg := fmt.Sprintf("runnable %q depends on %q, which is not a runnable", r.Name, d)
				if cl := closest(d, c.names()); cl != "" && cl != r.Name {
					msg += fmt.Sprintf("; did you mean %q?", cl)
				}
				p.add(r.depAt(j), "%s", msg)
			case d == r.Name:
				p.add(r.depAt(j), "runnable %q depends on itself; remove it from its deps", r.Name)
			case seen[d]:
				p.add(r.depAt(j), "runnable %q lists %q twice in deps; list it once", r.Name, d)
			case !placedIn(c.runEpoch, d, r.Name):
				// An epoch already reported as unknown: nothing to compare.
			case c.runEpoch[d] != c.runEpoch[r.Name]:
				p.add(r.depAt(j), "runnable %q (epoch %q) depends on %q of epoch %q; dependencies stay inside an epoch: move one of them", r.Name, c.runEpoch[r.Name], d, c.runEpoch[d])
			case d == r.Submitter:
				p.add(r.depAt(j), "runnable %q lists its submitter %q in deps; a submittee always follows its submitter: drop it from deps", r.Name, d)
			case dep.Submitter == r.Name:
				p.add(r.depAt(j), "runnable %q waits for %q, which it submits itself; only another runnable may wait for a submittee", r.Name, d)
			default:
				if c.resKind[dep.Resource].Kind == GPU {
					c.waited[d] = true
				}
			}
			seen[d] = true
		}
		if r.Submitter == "" {
			continue
		}
		sub, ok := c.run[r.Submitter]
		_, subKnown := c.resKind[sub.resourceOrEmpty()]
		at := r.at(r.keys.submitter)
		switch {
		case !ok:
			msg := fmt.Sprintf("runnable %q names submitter %q, which is not a runnable", r.Name, r.Submitter)
			if cl := closest(r.Submitter, c.names()); cl != "" && cl != r.Name {
				msg += fmt.Sprintf("; did you mean %q?", cl)
			}
			p.add(at, "%s", msg)
		case subKnown && c.resKind[sub.Resource].Kind != CPU:
			p.add(at, "runnable %q names submitter %q, which runs on %q; a submitter runs on a CPU core", r.Name, r.Submitter, sub.Resource)
		case sub.Client != r.Client:
			p.add(at, "runnable %q of client %q names submitter %q of client %q; a client submits only to its own streams", r.Name, r.Client, r.Submitter, sub.Client)
		case placedIn(c.runEpoch, r.Submitter, r.Name) && c.runEpoch[r.Submitter] != c.runEpoch[r.Name]:
			p.add(at, "runnable %q names submitter %q of another epoch; put them in the same epoch", r.Name, r.Submitter)
		}
	}
	if err := p.err(); err != nil {
		return
	}
	for i := range s.Runnables {
		r := &s.Runnables[i]
		if r.Submitter != "" && !c.waited[r.Name] {
			p.add(r.Line, "submittee %q has no waiter: nothing knows when its GPU work ends; add %q to the deps of the runnable that uses its result", r.Name, r.Name)
		}
	}
}

// placedIn reports whether runnables a and b both have a known epoch.
func placedIn(runEpoch map[string]string, a, b string) bool {
	_, okA := runEpoch[a]
	_, okB := runEpoch[b]
	return okA && okB
}

// resourceOrEmpty is r's resource, or "" for a nil r.
func (r *RunnableSpec) resourceOrEmpty() string {
	if r == nil {
		return ""
	}
	return r.Resource
}

// resLine is the line of the hyperepoch's resources.
func (h *HyperepochSpec) resLine() int {
	if h.resourcesLine > 0 {
		return h.resourcesLine
	}
	return h.Line
}

// checkClients reports a client with no runnables: the master waits for
// every listed client, so one with nothing to run would hold the run
// back forever.
func (c *compiler) checkClients() {
	busy := map[string]bool{}
	for _, r := range c.spec.Runnables {
		busy[r.Client] = true
	}
	for _, cl := range c.spec.Clients {
		if !busy[cl.Name] {
			c.p.add(cl.Line, "client %q has no runnables, and the master would wait for it forever; give it one (client: %s) or remove it from clients", cl.Name, cl.Name)
		}
	}
}

func (c *compiler) names() []string {
	out := make([]string, 0, len(c.spec.Runnables))
	for _, r := range c.spec.Runnables {
		out = append(out, r.Name)
	}
	return out
}

func listNames(cs []ClientSpec) string {
	var n []string
	for _, c := range cs {
		n = append(n, c.Name)
	}
	return strings.Join(n, ", ")
}

// preds returns a runnable's predecessors: its deps and its submitter.
func (c *compiler) preds(r *RunnableSpec) []string {
	if r.Submitter == "" {
		return r.Deps
	}
	return append(slices.Clone(r.Deps), r.Submitter)
}

// checkCycles reports each dependency cycle once, as a path.
func (c *compiler) checkCycles() {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	reported := map[string]bool{}
	var visit func(n string)
	visit = func(n string) {
		color[n] = grey
		stack = append(stack, n)
		for _, d := range c.preds(c.run[n]) {
			switch color[d] {
			case white:
				visit(d)
			case grey:
				i := slices.Index(stack, d)
				cyc := slices.Clone(stack[i:])
				key := slices.Clone(cyc)
				sort.Strings(key)
				if k := strings.Join(key, ","); !reported[k] {
					reported[k] = true
					// Print the cycle in dependency order: each waits for the next.
					path := append(cyc, d)
					slices.Reverse(path)
					first := c.run[d]
					c.p.add(first.Line, "dependency cycle: %s (each runs after the one before it); remove one of these deps", strings.Join(path, " -> "))
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
	}
	for _, r := range c.spec.Runnables {
		if color[r.Name] == white {
			visit(r.Name)
		}
	}
}

// slot is a busy interval on a resource.
type slot struct{ start, end time.Duration }

func (c *compiler) place() *Plan {
	s := c.spec
	plan := &Plan{Format: "pz-stm", Version: PlanVersion, Source: s.File, Spin: s.Spin}
	for _, cl := range s.Clients {
		plan.Clients = append(plan.Clients, cl.Name)
	}
	submittees := map[string][]string{}
	for _, r := range s.Runnables {
		if r.Submitter != "" {
			submittees[r.Submitter] = append(submittees[r.Submitter], r.Name)
		}
	}
	for _, h := range s.Hyperepochs {
		ph := PlanHyperepoch{Name: h.Name, Period: h.Period}
		for _, r := range h.Resources {
			ph.Resources = append(ph.Resources, c.resKind[r])
		}
		var offset time.Duration
		for _, e := range h.Epochs {
			period := c.epochPeriod[e.Name]
			pe := PlanEpoch{Name: e.Name, Frames: e.Frames, Period: period, Offset: offset}
			offset += time.Duration(e.Frames) * period
			var members []*RunnableSpec
			for i := range s.Runnables {
				if c.runEpoch[s.Runnables[i].Name] == e.Name {
					members = append(members, &s.Runnables[i])
				}
			}
			placed := c.placeEpoch(e, period, members)
			if placed == nil {
				continue // placeEpoch reported why; Compile returns those errors
			}
			for _, r := range members {
				pr := placed[r.Name]
				pr.Submittees = submittees[r.Name]
				pr.Overrun = r.Overrun
				if pr.Overrun == "" {
					pr.Overrun = s.Overrun
				}
				if pr.Overrun == "" {
					pr.Overrun = FrameSkip
				}
				pe.Runnables = append(pe.Runnables, *pr)
			}
			sort.SliceStable(pe.Runnables, func(i, j int) bool {
				a, b := pe.Runnables[i], pe.Runnables[j]
				if a.Start != b.Start {
					return a.Start < b.Start
				}
				return a.Resource < b.Resource
			})
			ph.Epochs = append(ph.Epochs, pe)
		}
		plan.Hyperepochs = append(plan.Hyperepochs, ph)
	}
	return plan
}

// placeEpoch list-schedules one epoch's runnables in a frame of period.
func (c *compiler) placeEpoch(e EpochSpec, period time.Duration, members []*RunnableSpec) map[string]*PlanRunnable {
	p := c.p
	// Lower bounds first, for messages that name the cause.
	load := map[string]time.Duration{}
	for _, r := range members {
		load[r.Resource] = addSat(load[r.Resource], r.WCET)
	}
	fits := true
	for _, res := range sortedKeys(load) {
		if load[res] > period {
			var names []string
			for _, r := range members {
				if r.Resource == res {
					names = append(names, fmt.Sprintf("%s %s", r.Name, r.WCET))
				}
			}
			p.add(e.Line, "the WCETs on %s in epoch %q add up to %s, more than its frame of %s (%s); lower them, move runnables to other resources or lengthen the period", res, e.Name, fmtSum(load[res]), period, strings.Join(names, ", "))
			fits = false
		}
	}
	succs := map[string][]string{}
	for _, r := range members {
		for _, d := range c.preds(r) {
			succs[d] = append(succs[d], r.Name)
		}
	}
	// bottom level: the longest path from a runnable's start to the end.
	bl := map[string]time.Duration{}
	next := map[string]string{}
	var level func(n string) time.Duration
	level = func(n string) time.Duration {
		if v, ok := bl[n]; ok {
			return v
		}
		var best time.Duration
		for _, s := range succs[n] {
			if v := level(s); v > best {
				best, next[n] = v, s
			}
		}
		bl[n] = addSat(best, c.run[n].WCET)
		return bl[n]
	}
	var cp time.Duration
	var head string
	for _, r := range members {
		if v := level(r.Name); v > cp {
			cp, head = v, r.Name
		}
	}
	if cp > period {
		path := []string{}
		for n := head; n != ""; n = next[n] {
			path = append(path, fmt.Sprintf("%s %s", n, c.run[n].WCET))
		}
		p.add(e.Line, "the longest dependency chain in epoch %q takes %s, more than its frame of %s (%s); lower these WCETs, break the chain or lengthen the period", e.Name, fmtSum(cp), period, strings.Join(path, " -> "))
		fits = false
	}
	if !fits {
		return nil
	}
	order := map[string]int{}
	for i, r := range members {
		order[r.Name] = i
	}
	placed := map[string]*PlanRunnable{}
	busy := map[string][]slot{}
	remaining := map[string]int{}
	var ready []*RunnableSpec
	for _, r := range members {
		remaining[r.Name] = len(c.preds(r))
		if remaining[r.Name] == 0 {
			ready = append(ready, r)
		}
	}
	var makespan time.Duration
	for len(ready) > 0 {
		// Highest bottom level first; ties in source order.
		bi := 0
		for i, r := range ready {
			b := ready[bi]
			if bl[r.Name] > bl[b.Name] || bl[r.Name] == bl[b.Name] && order[r.Name] < order[b.Name] {
				bi = i
			}
		}
		r := ready[bi]
		ready = slices.Delete(ready, bi, bi+1)
		var est time.Duration
		for _, d := range c.preds(r) {
			est = max(est, placed[d].End())
		}
		start := earliestGap(busy[r.Resource], est, r.WCET)
		busy[r.Resource] = insertSlot(busy[r.Resource], slot{start, start + r.WCET})
		placed[r.Name] = &PlanRunnable{
			Name: r.Name, Client: r.Client, Resource: r.Resource, Start: start, WCET: r.WCET,
			Deps: r.Deps, Submitter: r.Submitter, Timeout: r.Timeout, Line: r.Line,
		}
		makespan = max(makespan, start+r.WCET)
		for _, s := range succs[r.Name] {
			remaining[s]--
			if remaining[s] == 0 {
				ready = append(ready, c.run[s])
			}
		}
	}
	if makespan > period {
		p.add(e.Line, "epoch %q does not fit its frame of %s: the placed runnables end at %s although every resource's load and the longest chain fit; lengthen the period or lower WCETs (see the timeline of pzrun stm compile with a longer period)", e.Name, period, makespan)
		return nil
	}
	// Slack: latest finish with every successor (by dependency and by
	// resource order) at its latest start, computed from the last start
	// back; a successor starts strictly later, since WCETs are positive.
	byStart := make([]*PlanRunnable, 0, len(members))
	for _, r := range members {
		byStart = append(byStart, placed[r.Name])
	}
	sort.SliceStable(byStart, func(i, j int) bool { return byStart[i].Start > byStart[j].Start })
	latestStart := map[string]time.Duration{}
	nextOnRes := map[string]string{}
	lastOnRes := map[string]string{}
	for _, r := range byStart {
		nextOnRes[r.Name] = lastOnRes[r.Resource]
		lastOnRes[r.Resource] = r.Name
	}
	for _, r := range byStart {
		lf := period
		for _, s := range succs[r.Name] {
			lf = min(lf, latestStart[s])
		}
		if n := nextOnRes[r.Name]; n != "" {
			lf = min(lf, latestStart[n])
		}
		latestStart[r.Name] = lf - r.WCET
		r.Slack = lf - r.End()
	}
	return placed
}

// addSat returns a+b for durations that are not negative, saturating at
// maxDuration instead of wrapping around to a negative sum.
func addSat(a, b time.Duration) time.Duration {
	if a > maxDuration-b {
		return maxDuration
	}
	return a + b
}

// fmtSum prints a sum made by addSat: one that saturated is "more than"
// the longest duration.
func fmtSum(d time.Duration) string {
	if d == maxDuration {
		return "more than " + d.String() + " (the longest duration)"
	}
	return d.String()
}

// earliestGap returns the earliest start ≥ from at which a run of d fits
// between the busy slots (sorted by start).
func earliestGap(busy []slot, from, d time.Duration) time.Duration {
	t := from
	for _, s := range busy {
		if t+d <= s.start {
			return t
		}
		t = max(t, s.end)
	}
	return t
}

func insertSlot(busy []slot, s slot) []slot {
	i := sort.Search(len(busy), func(i int) bool { return busy[i].start > s.start })
	return slices.Insert(busy, i, s)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
