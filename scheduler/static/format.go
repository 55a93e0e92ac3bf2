package static

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// A Spec is a schedule as written: what Parse reads from the YAML source
// and Verify checks. Every element carries the source line it came from,
// so that errors can name it. The format is documented in
// docs/static-schedules.md.
type Spec struct {
	// File is the source's name in error messages.
	File string
	// Hyperepochs partition the resources; each repeats at its period.
	Hyperepochs []HyperepochSpec
	// Clients are the processes (or in-process clients) that run the
	// runnables.
	Clients []ClientSpec
	// Runnables are the units of work.
	Runnables []RunnableSpec
	// Overrun is the default overrun policy of every runnable.
	Overrun Policy
	// Spin is how long before each planned start a resource's thread
	// stops sleeping and spins; 0 never spins. Parse sets DefaultSpin
	// when the schedule has no spin key.
	Spin time.Duration
}

// A HyperepochSpec is a set of resources and the epochs that run on them,
// one after another, every Period.
type HyperepochSpec struct {
	Name      string
	Period    time.Duration
	Resources []string
	Epochs    []EpochSpec
	Line      int
	// resourcesLine is the line of its resources key when Parse read it
	// on a line of its own; 0: Line.
	resourcesLine int
}

// An EpochSpec is a part of a hyperepoch's period in which its runnables
// run Frames times, each frame lasting Period.
type EpochSpec struct {
	Name   string
	Frames int
	// Period is one frame's length; 0 shares what the hyperepoch's period
	// leaves among the epochs that give none.
	Period time.Duration
	Line   int
}

// A ClientSpec names one client.
type ClientSpec struct {
	Name string
	Line int
}

// A RunnableSpec is one unit of work: a function a client registers by
// Name and runs on Resource at its compiled offset in every frame of its
// epoch.
type RunnableSpec struct {
	Name     string
	Client   string
	Resource string
	// Epoch names the runnable's epoch; empty means the schedule's only
	// epoch.
	Epoch string
	// WCET is the worst-case execution time the compiler reserves.
	WCET time.Duration
	// Deps are the runnables that must end (in the same frame) before
	// this one starts.
	Deps []string
	// Submitter is set on a runnable of a GPU stream: the CPU runnable
	// that enqueues its work.
	Submitter string
	// Overrun is the policy when it runs past its WCET or deadline; ""
	// means the schedule's default.
	Overrun Policy
	// Timeout cancels the runnable's context this long after it starts;
	// 0 means none.
	Timeout time.Duration
	Line    int
	// keys are the lines of some of its keys, for the problems of one
	// key; Parse sets those that differ from Line (block style).
	keys keyLines
}

// keyLines are the source lines of a runnable's keys; 0 is the line of
// the runnable itself. depItems are the lines of Deps' items, each 0
// where it is the deps key's line (a flow-style list on one line).
type keyLines struct {
	client, resource, epoch, deps, submitter int
	depItems                                 []int
}

// depAt returns the line of the runnable's i-th dependency: its own line
// in a block-style list, else the deps key's (or the runnable's).
func (r *RunnableSpec) depAt(i int) int {
	if i < len(r.keys.depItems) && r.keys.depItems[i] > 0 {
		return r.keys.depItems[i]
	}
	return r.at(r.keys.deps)
}

// at returns line, or the runnable's own line when line is 0.
func (r *RunnableSpec) at(line int) int {
	if line > 0 {
		return line
	}
	return r.Line
}

// A Policy says what happens after a runnable overruns (runs past its
// WCET or its deadline).
type Policy string

// The overrun policies.
const (
	// FrameSkip skips the runnable's next frame (the next in which it
	// runs: in its epoch, or its epoch's first of the next period) and
	// that frame of every runnable that depends on it, so the schedule
	// catches up.
	FrameSkip Policy = "frameskip"
	// NoSkip runs every frame, late if need be, until it catches up.
	NoSkip Policy = "noskip"
)

// DefaultSpin is how long before a planned start a resource's thread
// spins instead of sleeping, unless the schedule sets spin.
const DefaultSpin = 50 * time.Microsecond

// An Error is one problem in a schedule, at a line of its source.
type Error struct {
	File string
	Line int
	// Msg says what is wrong and how to fix it.
	Msg string
}

// Error returns "file:line: message".
func (e *Error) Error() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	case e.File != "":
		return e.File + ": " + e.Msg
	}
	return e.Msg
}

// An ErrorList is every problem found in a schedule, in line order.
type ErrorList []*Error

// Error returns every problem, one per line.
func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap lets errors.As find each *Error.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// problems collects errors while reading or checking a schedule.
type problems struct {
	file string
	list ErrorList
	// meant holds, by mapping, the known keys that an unknown key of it
	// likely misspells (fields): require does not report them missing
	// too, as "did you mean" says it already.
	meant map[*yaml.Node]map[string]bool
}

func (p *problems) add(line int, format string, args ...any) {
	p.list = append(p.list, &Error{File: p.file, Line: line, Msg: clipQuoted(fmt.Sprintf(format, args...))})
}

// maxQuoted is the longest value a message quotes whole; clip cuts a
// longer one (a file of one 50 MB line made a 50 MB message).
const maxQuoted = 1024

// clipQuoted clips every Go-quoted value in msg (as %q writes a name or
// a value) longer than maxQuoted bytes.
func clipQuoted(msg string) string {
	if len(msg) <= maxQuoted {
		return msg
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(msg, '"')
		if i < 0 {
			break
		}
		b.WriteString(msg[:i])
		msg = msg[i:]
		q, err := strconv.QuotedPrefix(msg)
		if err != nil {
			b.WriteByte('"')
			msg = msg[1:]
			continue
		}
		msg = msg[len(q):]
		if v, err := strconv.Unquote(q); err == nil && len(v) > maxQuoted {
			q = strconv.Quote(clip(v))
		}
		b.WriteString(q)
	}
	b.WriteString(msg)
	return b.String()
}

// clip returns s, or, if s is longer than maxQuoted bytes, its first 64
// bytes (whole characters) then "…(N bytes)".
func clip(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	n := 64
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:n], len(s))
}

// err returns the problems sorted by line (stable), or nil.
func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	sort.SliceStable(p.list, func(i, j int) bool { return p.list[i].Line < p.list[j].Line })
	return p.list
}

// Parse reads a schedule from YAML source. file names it in errors. It
// reports every problem of form it finds (unknown keys, wrong types, bad
// durations) as an ErrorList; what the schedule means is checked by Verify.
func Parse(src []byte, file string) (*Spec, error) {
	p := &problems{file: file}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(src))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		line, msg := yamlSyntax(src, err)
		p.add(line, "%s", msg)
		return nil, p.err()
	}
	// A second document ("---" and more) would be ignored silently.
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		line := next.Line
		if err != nil && strings.Contains(err.Error(), "did not find expected <document start>") {
			// Not a second document: the first ended early, where a
			// line is indented less than the first line.
			line, msg := yamlSyntax(src, err)
			p.add(line, "%s", msg)
			return nil, p.err()
		}
		if err != nil {
			line = yamlErrLine(err)
		}
		p.add(line, "a second YAML document starts here (after ---); a schedule is one document: remove it or put it in a file of its own")
		return nil, p.err()
	}
	s := &Spec{File: file}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		p.add(1, "the schedule is empty; it needs hyperepochs, clients and runnables (see docs/static-schedules.md)")
		return nil, p.err()
	}
	root := doc.Content[0]
	if !p.isMap(root, "the schedule") {
		return nil, p.err()
	}
	// A plan or a run record is JSON, hence YAML: without this, one given
	// to Parse (pzrun stm compile PLAN.stm) got a problem per JSON key.
	if msg := notASchedule(root); msg != "" {
		p.add(1, "%s", msg)
		return nil, p.err()
	}
	seen := p.fields(root, "the schedule", []string{"hyperepochs", "clients", "runnables", "overrun", "spin"})
	p.require(root, seen, "the schedule", "hyperepochs", "clients", "runnables")
	if n := seen["hyperepochs"]; n != nil && p.isSeq(n, "hyperepochs") {
		for _, h := range n.Content {
			s.Hyperepochs = append(s.Hyperepochs, p.hyperepoch(h))
		}
	}
	if n := seen["clients"]; n != nil && p.isSeq(n, "clients") {
		for _, c := range n.Content {
			if name, ok := p.name(c, "a client"); ok {
				s.Clients = append(s.Clients, ClientSpec{Name: name, Line: c.Line})
			}
		}
	}
	if n := seen["runnables"]; n != nil && p.isSeq(n, "runnables") {
		for _, r := range n.Content {
			s.Runnables = append(s.Runnables, p.runnable(r))
		}
	}
	if n := seen["overrun"]; n != nil {
		s.Overrun = p.policy(n)
	}
	if n := seen["spin"]; n != nil {
		s.Spin = p.duration(n, "spin", true)
	}
	if s.Overrun == "" {
		s.Overrun = FrameSkip
	}
	if seen["spin"] == nil {
		s.Spin = DefaultSpin
	}
	return s, p.err()
}

func (p *problems) hyperepoch(n *yaml.Node) HyperepochSpec {
	h := HyperepochSpec{Line: n.Line}
	if !p.isMap(n, "a hyperepoch") {
		return h
	}
	f := p.fields(n, "a hyperepoch", []string{"name", "period", "resources", "epochs"})
	p.require(n, f, named("hyperepoch", "a hyperepoch", f), "name", "period", "resources", "epochs")
	if v := f["name"]; v != nil {
		h.Name, _ = p.name(v, "a hyperepoch's name")
	}
	if v := f["period"]; v != nil {
		h.Period = p.duration(v, "period", false)
	}
	if v := f["resources"]; v != nil && p.isSeq(v, "resources") {
		h.resourcesLine = keyLine(n, v)
		for _, r := range v.Content {
			if name, ok := p.name(r, "a resource"); ok {
				h.Resources = append(h.Resources, name)
			}
		}
	}
	if v := f["epochs"]; v != nil && p.isSeq(v, "epochs") {
		for _, e := range v.Content {
			h.Epochs = append(h.Epochs, p.epoch(e))
		}
	}
	return h
}

func (p *problems) epoch(n *yaml.Node) EpochSpec {
	e := EpochSpec{Line: n.Line, Frames: 1}
	if !p.isMap(n, "an epoch") {
		return e
	}
	f := p.fields(n, "an epoch", []string{"name", "frames", "period"})
	p.require(n, f, "an epoch", "name")
	if v := f["name"]; v != nil {
		e.Name, _ = p.name(v, "an epoch's name")
	}
	if v := f["frames"]; v != nil {
		k, err := strconv.Atoi(v.Value)
		if v.Kind != yaml.ScalarNode || err != nil || k < 1 {
			p.add(v.Line, "%s, got %q", framesMust, v.Value)
		} else {
			e.Frames = k
		}
	}
	if v := f["period"]; v != nil {
		e.Period = p.duration(v, "period", false)
	}
	return e
}

func (p *problems) runnable(n *yaml.Node) RunnableSpec {
	r := RunnableSpec{Line: n.Line}
	if !p.isMap(n, "a runnable") {
		return r
	}
	f := p.fields(n, "a runnable", []string{"name", "client", "resource", "epoch", "wcet", "deps", "submitter", "overrun", "timeout"})
	label := named("runnable", "a runnable", f)
	p.require(n, f, label, "name", "client", "resource", "wcet")
	// of names a field of this runnable: "the client of runnable "x"".
	of := func(field string) string {
		if label == "a runnable" {
			return "a runnable's " + field
		}
		return "the " + field + " of " + label
	}
	if v := f["name"]; v != nil {
		r.Name, _ = p.name(v, "a runnable's name")
	}
	if v := f["client"]; v != nil {
		r.Client, _ = p.name(v, of("client"))
		r.keys.client = keyLine(n, v)
	}
	if v := f["resource"]; v != nil {
		r.Resource, _ = p.name(v, of("resource"))
		r.keys.resource = keyLine(n, v)
	}
	if v := f["epoch"]; v != nil {
		r.Epoch, _ = p.name(v, of("epoch"))
		r.keys.epoch = keyLine(n, v)
	}
	if v := f["wcet"]; v != nil {
		r.WCET = p.duration(v, "wcet", false)
	}
	if v := f["deps"]; v != nil && p.isSeq(v, "deps") {
		r.keys.deps = keyLine(n, v)
		for _, d := range v.Content {
			if name, ok := p.name(d, "a dependency"); ok {
				r.Deps = append(r.Deps, name)
				line := 0
				if d.Line != r.at(r.keys.deps) {
					line = d.Line
				}
				r.keys.depItems = append(r.keys.depItems, line)
			}
		}
	}
	if v := f["submitter"]; v != nil {
		r.Submitter, _ = p.name(v, "a submitter")
		r.keys.submitter = keyLine(n, v)
	}
	if v := f["overrun"]; v != nil {
		r.Overrun = p.policy(v)
	}
	if v := f["timeout"]; v != nil {
		r.Timeout = p.duration(v, "timeout", true)
	}
	return r
}

// keyLine returns the line of value v's key in mapping m when it is not
// m's line (block style), else 0.
func keyLine(m, v *yaml.Node) int {
	for i := 1; i < len(m.Content); i += 2 {
		if m.Content[i] == v && m.Content[i-1].Line != m.Line {
			return m.Content[i-1].Line
		}
	}
	return 0
}

func (p *problems) isMap(n *yaml.Node, what string) bool {
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, "%s must be a mapping of keys to values, got %s", what, kindName(n))
		return false
	}
	return true
}

func (p *problems) isSeq(n *yaml.Node, what string) bool {
	if n.Kind != yaml.SequenceNode {
		p.add(n.Line, "%s must be a list, such as [a, b], got %s", what, kindName(n))
		return false
	}
	return true
}

// fields returns a mapping's values by key, reporting unknown keys (with
// the closest known one) and repeated keys.
func (p *problems) fields(n *yaml.Node, what string, known []string) map[string]*yaml.Node {
	out := make(map[string]*yaml.Node)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Value == "<<" && k.Tag == "!!merge":
			p.add(k.Line, "a YAML merge key (<<) in %s: merge keys and aliases are not supported (a schedule says every key where it applies); write the keys out", what)
		case !slices.Contains(known, k.Value):
			msg := fmt.Sprintf("unknown key %q in %s", k.Value, what)
			if c := closest(k.Value, known); c != "" {
				msg += fmt.Sprintf("; did you mean %q?", c)
				if p.meant == nil {
					p.meant = map[*yaml.Node]map[string]bool{}
				}
				if p.meant[n] == nil {
					p.meant[n] = map[string]bool{}
				}
				p.meant[n][c] = true
			} else {
				msg += "; the keys are " + strings.Join(known, ", ")
			}
			p.add(k.Line, "%s", msg)
		case out[k.Value] != nil:
			p.add(k.Line, "key %q given twice in %s (first on line %d); keep one", k.Value, what, out[k.Value].Line)
		default:
			out[k.Value] = v
		}
	}
	return out
}

// require reports the keys of mapping n missing from f; what names the
// mapping in the message.
func (p *problems) require(n *yaml.Node, f map[string]*yaml.Node, what string, keys ...string) {
	for _, k := range keys {
		if f[k] == nil && !p.meant[n][k] {
			p.add(n.Line, "%s has no %s; add %s: ...", what, k, k)
		}
	}
}

// named names a mapping of fields f in messages by its name, such as
// `runnable "x"`, or as anon when it has no valid name (which is reported
// by itself).
func named(kind, anon string, f map[string]*yaml.Node) string {
	v := f["name"]
	if v == nil || v.Kind != yaml.ScalarNode || !validName(v.Value) {
		return anon
	}
	return fmt.Sprintf("%s %q", kind, v.Value)
}

// validName reports whether s is a name: not empty, and only letters,
// digits, '_', '-' and '.'.
func validName(s string) bool {
	return s != "" && badNameChar(s) < 0
}

// badNameChar returns the first character of s that a name may not have,
// or -1.
func badNameChar(s string) rune {
	for _, c := range s {
		if !(c == '_' || c == '-' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return c
		}
	}
	return -1
}

// name reads a scalar name: letters, digits and _ . - only.
func (p *problems) name(n *yaml.Node, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		p.add(n.Line, "%s must be a name, got %s", what, kindName(n))
		return "", false
	}
	if n.Tag == "!!null" && n.Value != "" { // ~ or null: not the name "~"
		p.add(n.Line, "%s is %s, YAML's null, so it has no name; give it a name", what, n.Value)
		return "", false
	}
	if msg := nameProblem(what, n.Value); msg != "" {
		p.add(n.Line, "%s", msg)
		return "", false
	}
	return n.Value, true
}

// nameProblem says what is wrong with name s, or returns "": Parse and
// Compile (for a Spec built in Go) share it.
func nameProblem(what, s string) string {
	if s == "" {
		return what + " is empty; give it a name"
	}
	if c := badNameChar(s); c >= 0 {
		return fmt.Sprintf("%s %q has the character %q; names use ASCII letters and digits, '_', '-' and '.'", what, s, c)
	}
	return ""
}

// framesMust says what frames may be.
const framesMust = "frames must be a whole number of at least 1"

// durationProblem says what is wrong with duration d of field what, or
// returns "": it must be positive, or not negative when zeroOK. text is
// how d was written.
func durationProblem(what string, d time.Duration, text string, zeroOK bool) string {
	switch {
	case d < 0 && zeroOK:
		return fmt.Sprintf("%s must not be negative, got %s", what, text)
	case d <= 0 && !zeroOK:
		return fmt.Sprintf("%s must be positive, got %s", what, text)
	}
	return ""
}

// policyProblem says what is wrong with overrun policy pol, or returns
// "" for FrameSkip and NoSkip (and "" when emptyOK: the default).
func policyProblem(pol Policy, emptyOK bool) string {
	switch {
	case pol == FrameSkip, pol == NoSkip, pol == "" && emptyOK:
		return ""
	}
	return fmt.Sprintf("unknown overrun policy %q; use %s or %s", pol, FrameSkip, NoSkip)
}

// maxDuration is the longest time.Duration, about 2562047h.
const maxDuration = time.Duration(math.MaxInt64)

// tooLong reports whether s is written as a duration (numbers with
// units, as time.ParseDuration reads them) but is longer than
// maxDuration, which ParseDuration refuses as if it were no duration.
func tooLong(s string) bool {
	units := map[string]float64{"ns": 1, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}
	s = strings.TrimLeft(s, "+-")
	if s == "" {
		return false
	}
	var total float64
	for s != "" {
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		num, err := strconv.ParseFloat(s[:i], 64)
		if i == 0 || err != nil {
			return false
		}
		j := i
		for j < len(s) && !(s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
			j++
		}
		u, ok := units[s[i:j]]
		if !ok {
			return false
		}
		total += num * u
		s = s[j:]
	}
	return total > float64(maxDuration)
}

// bareNumber returns s, a number without a unit, written so that
// time.ParseDuration reads it once a unit follows ("1e3" as "1000"), or
// "" if s is no number or cannot be (Inf, NaN, a hexadecimal float).
func bareNumber(s string) string {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return ""
	}
	if _, err := time.ParseDuration(s + "ms"); err == nil {
		return s
	}
	num := strconv.FormatFloat(f, 'f', -1, 64)
	if _, err := time.ParseDuration(num + "ms"); err != nil {
		return ""
	}
	return num
}

// durationUnits maps the unit names people write to Go's.
var durationUnits = map[string]string{
	"ns": "ns", "nsec": "ns", "nsecs": "ns", "nanosecond": "ns", "nanoseconds": "ns",
	"us": "us", "µs": "us", "μs": "us", "usec": "us", "usecs": "us", "microsecond": "us", "microseconds": "us",
	"ms": "ms", "msec": "ms", "msecs": "ms", "millisecond": "ms", "milliseconds": "ms",
	"s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
	"m": "m", "min": "m", "mins": "m", "minute": "m", "minutes": "m",
	"h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
}

// durationHint returns how s, which time.ParseDuration refuses, is
// likely meant as a duration ("10 us" as "10us", "1MS" as "1ms", "1msec"
// as "1ms", "1e3us" as "1000us"), or "" if it sees none. "M" alone is
// left alone: minutes or a typo of ms.
func durationHint(s string) string {
	t := strings.Join(strings.Fields(s), "")
	sign := ""
	if strings.HasPrefix(t, "-") || strings.HasPrefix(t, "+") {
		sign, t = t[:1], t[1:]
	}
	if sign == "+" {
		sign = ""
	}
	var b strings.Builder
	b.WriteString(sign)
	for t != "" {
		i := 0
		for i < len(t) {
			c := t[i]
			exp := (c == 'e' || c == 'E') && i > 0 && i+1 < len(t) && (t[i+1] >= '0' && t[i+1] <= '9' || t[i+1] == '-' || t[i+1] == '+')
			expSign := (c == '-' || c == '+') && i > 0 && (t[i-1] == 'e' || t[i-1] == 'E')
			if !(c >= '0' && c <= '9' || c == '.' || exp || expSign) {
				break
			}
			i++
		}
		num := bareNumber(t[:i])
		if i == 0 || num == "" {
			return ""
		}
		j := i
		for j < len(t) && !(t[j] >= '0' && t[j] <= '9' || t[j] == '.') {
			j++
		}
		if t[i:j] == "M" {
			return ""
		}
		unit, ok := durationUnits[strings.ToLower(t[i:j])]
		if !ok {
			return ""
		}
		b.WriteString(num + unit)
		t = t[j:]
	}
	hint := b.String()
	if _, err := time.ParseDuration(hint); err != nil || hint == s {
		return ""
	}
	return hint
}

// duration reads a duration with a unit ("10ms", "100us", "1.5ms").
func (p *problems) duration(n *yaml.Node, what string, zeroOK bool) time.Duration {
	if n.Kind != yaml.ScalarNode {
		p.add(n.Line, "%s must be a duration such as 10ms, got %s", what, kindName(n))
		return 0
	}
	if n.Tag == "!!null" {
		p.add(n.Line, "%s has no value; write it such as 10ms, 250us or 1.5ms", what)
		return 0
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		if tooLong(n.Value) {
			p.add(n.Line, "%s %q is too long; the longest duration is %s", what, n.Value, maxDuration)
		} else if num := bareNumber(n.Value); num != "" {
			p.add(n.Line, "%s %q has no unit; write it as %sms, %sus or %ss", what, n.Value, num, num, num)
		} else if hint := durationHint(n.Value); hint != "" {
			p.add(n.Line, "%s %q is not a duration; write it as %s", what, n.Value, hint)
		} else {
			p.add(n.Line, "%s %q is not a duration; write it such as 10ms, 250us or 1.5ms", what, n.Value)
		}
		return 0
	}
	if msg := durationProblem(what, d, n.Value, zeroOK); msg != "" {
		p.add(n.Line, "%s", msg)
		return 0
	}
	return d
}

func (p *problems) policy(n *yaml.Node) Policy {
	if msg := policyProblem(Policy(n.Value), false); msg != "" {
		p.add(n.Line, "%s", msg)
		return ""
	}
	return Policy(n.Value)
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", clip(n.Value))
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}

// yamlErrLine finds "line N" in a YAML library error; 0 if none.
func yamlErrLine(err error) int {
	s := err.Error()
	i := strings.Index(s, "line ")
	if i < 0 {
		return 0
	}
	j := i + len("line ")
	k := j
	for k < len(s) && s[k] >= '0' && s[k] <= '9' {
		k++
	}
	n, _ := strconv.Atoi(s[j:k])
	return n
}

// closest returns the candidate nearest to s by edit distance, if it is
// within 2 edits and those edits change less than half of s; else "".
func closest(s string, candidates []string) string {
	best, bestD := "", min(3, (len(s)+1)/2)
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and transpositions of two adjacent letters
// ("wect" for "wcet" is one edit) each count one.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1) // row i-2
	prev := make([]int, len(b)+1)  // row i-1
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// notASchedule says what root is when it is the top of a compiled plan
// or a run record (their format key) rather than a schedule, and what to
// do with it; "" otherwise.
func notASchedule(root *yaml.Node) string {
	var format, source string
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			continue
		}
		switch k.Value {
		case "format":
			format = v.Value
		case "source":
			source = v.Value
		}
	}
	from := ""
	if source != "" {
		from = fmt.Sprintf(", compiled from %q", source)
	}
	switch format {
	case "pz-stm":
		return fmt.Sprintf("this is a compiled plan (format pz-stm%s), not a schedule: it needs no compiling; give it as it is to pzrun stm master, client or run, or compile its schedule (the .yaml)", from)
	case "pz-stm-run":
		return "this is a run record (format pz-stm-run), not a schedule: read it with pzrun stm analyze, and compile the schedule (the .yaml) instead"
	}
	return ""
}
