package static_test

import (
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler/static"
)

// errCase is a schedule with a problem and the exact text of the error
// that Parse (or, if Parse accepts it, Compile) returns for it.
type errCase struct {
	name string
	src  string
	want string
}

// schedErr parses src as s.yaml and, if that succeeds, compiles it; it
// returns the first error.
func schedErr(src string) error {
	spec, err := static.Parse([]byte(src), "s.yaml")
	if err != nil {
		return err
	}
	_, err = static.Compile(spec)
	return err
}

var lineRE = regexp.MustCompile(`^s\.yaml:(\d+): `)

// runErrCases checks each case's full error text, that it is an
// ErrorList of *static.Error naming s.yaml, and that errors.As finds the
// first *static.Error with the line the text starts with.
func runErrCases(t *testing.T, cases []errCase) {
	t.Helper()
	names := map[string]bool{}
	for _, tc := range cases {
		require.False(t, names[tc.name], "case name %q repeated", tc.name)
		names[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			err := schedErr(tc.src)
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())

			var list static.ErrorList
			require.ErrorAs(t, err, &list)
			require.Len(t, list, strings.Count(tc.want, "\n")+1)
			for i, e := range list {
				assert.Equal(t, "s.yaml", e.File, "entry %d", i)
				assert.NotEmpty(t, e.Msg, "entry %d", i)
				if i > 0 {
					assert.LessOrEqual(t, list[i-1].Line, e.Line, "entries are in line order")
				}
			}

			var first *static.Error
			require.ErrorAs(t, err, &first)
			wantLine := 0
			if m := lineRE.FindStringSubmatch(tc.want); m != nil {
				wantLine, _ = strconv.Atoi(m[1])
			}
			assert.Equal(t, wantLine, first.Line)
			assert.Same(t, list[0], first)
		})
	}
}

// TestParseErrors: every problem of form that Parse reports, with its
// line and the exact message.
func TestParseErrors(t *testing.T) {
	runErrCases(t, []errCase{
		{
			// It said the name "~" had the character '~'.
			name: "a null name",
			src:  "hyperepochs: [{name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}]\nclients: [a, null]\nrunnables:\n  - {name: ~, client: a, resource: cpu0, wcet: 1ms}\n",
			want: `s.yaml:2: a client is null, YAML's null, so it has no name; give it a name
s.yaml:4: a runnable's name is ~, YAML's null, so it has no name; give it a name`,
		},
		{
			name: "not YAML",
			src:  "hyperepochs: [\n",
			want: `s.yaml:1: not valid YAML: the [ opened on line 1 is not closed; close the [ opened on line 1 with ] (the parser: line 1: did not find expected node content)`,
		},
		{
			name: "not YAML on a later line",
			src:  "clients: [c]\nhyperepochs: x\n  y: z\n",
			want: `s.yaml:3: not valid YAML: line 3 is indented under line 2, whose key already has a value; this item is indented differently from its siblings: indent it as they are (the parser: line 3: mapping values are not allowed in this context)`,
		},
		// The parser names the line of the enclosing block, not the
		// culprit's: the text is scanned for it.
		{
			name: "an unclosed bracket",
			src:  "hyperepochs:\n  - name: h\n    period: 10ms\n    resources: [cpu0\n    epochs: [{name: f}]\nclients: [a]\n",
			want: `s.yaml:4: not valid YAML: the [ opened on line 4 is not closed; close the [ opened on line 4 with ] (the parser: line 3: did not find expected ',' or ']')`,
		},
		{
			name: "a wrong closing bracket",
			src:  "clients: [a, b}\nrunnables: []\n",
			want: `s.yaml:1: not valid YAML: the [ opened on line 1 is not closed; close the [ opened on line 1 with ] (the parser: did not find expected ',' or ']')`,
		},
		{
			name: "a sibling one space short",
			src:  "clients: [a]\nrunnables:\n  - name: x\n    client: a\n   resource: cpu0\n    wcet: 1ms\n",
			want: `s.yaml:5: not valid YAML: line 5 is indented by 3 spaces, the lines around it by 2 or 4; this item is indented differently from its siblings: indent it as they are (the parser: line 2: did not find expected '-' indicator)`,
		},
		{
			name: "a tab",
			src:  "hyperepochs:\n  - name: h\n\tperiod: 10ms\n",
			want: `s.yaml:3: not valid YAML: line 3 is indented with a tab; indent with spaces, not tabs (the parser: line 2: found a tab character that violates indentation)`,
		},
		{
			name: "a key without a colon",
			src:  "clients: [a]\nrunnables:\n  - {name: x, client: a}\n  - name y\n    client: a\n",
			want: `s.yaml:4: not valid YAML: "- name y" on line 4 has no colon; a key needs a colon and a space after it (key: value) (the parser: line 5: mapping values are not allowed in this context)`,
		},
		{
			name: "a culprit not found",
			src:  "clients: [a]\nrunnables: x: y\n",
			want: `s.yaml:2: not valid YAML at or before line 2: mapping values are not allowed in this context`,
		},
		{
			// The YAML library gives no line for this one, so neither
			// does the message.
			name: "not YAML without a line",
			src:  "clients: [c\x01]\n",
			want: `s.yaml: not valid YAML: control characters are not allowed`,
		},
		{
			name: "empty file",
			src:  "",
			want: `s.yaml:1: the schedule is empty; it needs hyperepochs, clients and runnables (see docs/static-schedules.md)`,
		},
		{
			name: "only a comment",
			src:  "# nothing yet\n",
			want: `s.yaml:1: the schedule is empty; it needs hyperepochs, clients and runnables (see docs/static-schedules.md)`,
		},
		{
			name: "schedule is a list",
			src:  "- hyperepochs\n- clients\n",
			want: `s.yaml:1: the schedule must be a mapping of keys to values, got a list`,
		},
		{
			name: "schedule is a scalar",
			src:  "hello\n",
			want: `s.yaml:1: the schedule must be a mapping of keys to values, got "hello"`,
		},
		{
			name: "unknown top-level key with suggestion",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
clients: [c]
runables:
  - {name: a, client: c, resource: cpu0, wcet: 1ms}
`,
			// (Not also "the schedule has no runnables": the suggestion
			// says what is missing.)
			want: `s.yaml:4: unknown key "runables" in the schedule; did you mean "runnables"?`,
		},
		{
			name: "unknown keys at every level with suggestion",
			src: `hyperepochs:
  - name: h
    peroid: 10ms
    period: 10ms
    resources: [cpu0]
    epochs: [{name: f, frame: 2}]
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ms, dep: [b]}
overun: noskip
`,
			want: `s.yaml:3: unknown key "peroid" in a hyperepoch; did you mean "period"?
s.yaml:6: unknown key "frame" in an epoch; did you mean "frames"?
s.yaml:9: unknown key "dep" in a runnable; did you mean "deps"?
s.yaml:10: unknown key "overun" in the schedule; did you mean "overrun"?`,
		},
		{
			name: "merge key",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
clients: [c]
runnables:
  - &a {name: a, client: c, resource: cpu0, wcet: 1ms}
  - {<<: *a, name: b}
`,
			want: `s.yaml:6: a YAML merge key (<<) in a runnable: merge keys and aliases are not supported (a schedule says every key where it applies); write the keys out
s.yaml:6: runnable "b" has no client; add client: ...
s.yaml:6: runnable "b" has no resource; add resource: ...
s.yaml:6: runnable "b" has no wcet; add wcet: ...`,
		},
		{
			name: "transposed letters",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wect: 1ms}
`,
			want: `s.yaml:5: unknown key "wect" in a runnable; did you mean "wcet"?`,
		},
		{
			name: "unknown key without suggestion",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f, color: red}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ms, priority: 3}
`,
			want: `s.yaml:2: unknown key "color" in an epoch; the keys are name, frames, period
s.yaml:5: unknown key "priority" in a runnable; the keys are name, client, resource, epoch, wcet, deps, submitter, overrun, timeout`,
		},
		{
			name: "key given twice",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
clients: [c]
runnables:
  - name: a
    client: c
    resource: cpu0
    wcet: 1ms
    wcet: 2ms
clients: [d]
`,
			want: `s.yaml:9: key "wcet" given twice in a runnable (first on line 8); keep one
s.yaml:10: key "clients" given twice in the schedule (first on line 3); keep one`,
		},
		{
			name: "missing required keys",
			src: `hyperepochs:
  - {name: h, resources: [cpu0], epochs: [{frames: 2}]}
  - {period: 10ms, resources: [cpu1]}
clients: [c]
runnables:
  - {name: a, resource: cpu0}
`,
			want: `s.yaml:2: hyperepoch "h" has no period; add period: ...
s.yaml:2: an epoch has no name; add name: ...
s.yaml:3: a hyperepoch has no name; add name: ...
s.yaml:3: a hyperepoch has no epochs; add epochs: ...
s.yaml:6: runnable "a" has no client; add client: ...
s.yaml:6: runnable "a" has no wcet; add wcet: ...`,
		},
		{
			// The trial's bad/nores.yaml and bad/noclient.yaml: a missing
			// key names its runnable; an empty value is not a name.
			name: "runnable without resource or client",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: x, client: c, wcet: 1ms}
  - {name: y, client: c, resource: , wcet: 1ms}
  - {name: z, client: c, resource: "", wcet: 1ms}
  - {name: a, client: camera, resource: cpu0, wcet: 1ms}
  - {name: b, resource: cpu0, wcet: 1ms}
  - {client: c, resource: cpu0, wcet: 1ms}
  - {name: "é", wcet: 1ms}
  - {client: "", resource: cpu0, wcet: 1ms, name: ""}
`,
			want: `s.yaml:5: runnable "x" has no resource; add resource: ...
s.yaml:6: the resource of runnable "y" is empty; give it a name
s.yaml:7: the resource of runnable "z" is empty; give it a name
s.yaml:9: runnable "b" has no client; add client: ...
s.yaml:10: a runnable has no name; add name: ...
s.yaml:11: a runnable has no client; add client: ...
s.yaml:11: a runnable has no resource; add resource: ...
s.yaml:11: a runnable's name "é" has the character 'é'; names use ASCII letters and digits, '_', '-' and '.'
s.yaml:12: a runnable's name is empty; give it a name
s.yaml:12: a runnable's client is empty; give it a name`,
		},
		{
			name: "missing sections",
			src:  "overrun: noskip\n",
			want: `s.yaml:1: the schedule has no hyperepochs; add hyperepochs: ...
s.yaml:1: the schedule has no clients; add clients: ...
s.yaml:1: the schedule has no runnables; add runnables: ...`,
		},
		{
			name: "duration without unit",
			src: `hyperepochs:
  - {name: h, period: 10, resources: [cpu0], epochs: [{name: f, period: 2.5}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1, timeout: 3}
spin: 0.5
`,
			want: `s.yaml:2: period "10" has no unit; write it as 10ms, 10us or 10s
s.yaml:2: period "2.5" has no unit; write it as 2.5ms, 2.5us or 2.5s
s.yaml:5: wcet "1" has no unit; write it as 1ms, 1us or 1s
s.yaml:5: timeout "3" has no unit; write it as 3ms, 3us or 3s
s.yaml:6: spin "0.5" has no unit; write it as 0.5ms, 0.5us or 0.5s`,
		},
		{
			name: "not a duration",
			src: `hyperepochs:
  - {name: h, period: 10 ms, resources: [cpu0], epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: fast}
  - {name: b, client: c, resource: cpu0, wcet: [1ms]}
  - {name: d, client: c, resource: cpu0, wcet: 1ms, timeout: {ms: 1}}
`,
			want: `s.yaml:2: period "10 ms" is not a duration; write it as 10ms
s.yaml:5: wcet "fast" is not a duration; write it such as 10ms, 250us or 1.5ms
s.yaml:6: wcet must be a duration such as 10ms, got a list
s.yaml:7: timeout must be a duration such as 10ms, got a mapping`,
		},
		{
			name: "zero or negative durations",
			src: `hyperepochs:
  - {name: h, period: 0s, resources: [cpu0], epochs: [{name: f, period: -1ms}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 0ms}
  - {name: b, client: c, resource: cpu0, wcet: -2ms}
  - {name: d, client: c, resource: cpu0, wcet: 0}
  - {name: e, client: c, resource: cpu0, wcet: 1ms, timeout: -1us}
spin: -1us
`,
			want: `s.yaml:2: period must be positive, got 0s
s.yaml:2: period must be positive, got -1ms
s.yaml:5: wcet must be positive, got 0ms
s.yaml:6: wcet must be positive, got -2ms
s.yaml:7: wcet must be positive, got 0
s.yaml:8: timeout must not be negative, got -1us
s.yaml:9: spin must not be negative, got -1us`,
		},
		{
			name: "bad frames",
			src: `hyperepochs:
  - name: h
    period: 10ms
    resources: [cpu0]
    epochs:
      - {name: a, frames: 0}
      - {name: b, frames: -1}
      - {name: c, frames: two}
      - {name: d, frames: 1.5}
      - {name: e, frames: [1]}
clients: [c]
runnables:
  - {name: r, client: c, resource: cpu0, epoch: a, wcet: 1ms}
`,
			want: `s.yaml:6: frames must be a whole number of at least 1, got "0"
s.yaml:7: frames must be a whole number of at least 1, got "-1"
s.yaml:8: frames must be a whole number of at least 1, got "two"
s.yaml:9: frames must be a whole number of at least 1, got "1.5"
s.yaml:10: frames must be a whole number of at least 1, got ""`,
		},
		{
			name: "unknown overrun policy",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ms, overrun: skip}
overrun: FrameSkip
`,
			want: `s.yaml:5: unknown overrun policy "skip"; use frameskip or noskip
s.yaml:6: unknown overrun policy "FrameSkip"; use frameskip or noskip`,
		},
		{
			name: "bad names",
			src: `hyperepochs:
  - {name: "main loop", period: 10ms, resources: [cpu0, "gpu0 stream0"], epochs: [{name: ""}]}
clients: [camera, "a/b", [x]]
runnables:
  - {name: café, client: camera, resource: cpu0, wcet: 1ms}
  - {name: b, client: "", resource: cpu0, wcet: 1ms, deps: [a, "b c"], epoch: {x: 1}}
  - {name: c, client: camera, resource: gpu0.stream0, wcet: 1ms, submitter: "x:y"}
`,
			want: `s.yaml:2: a hyperepoch's name "main loop" has the character ' '; names use ASCII letters and digits, '_', '-' and '.'
s.yaml:2: a resource "gpu0 stream0" has the character ' '; names use ASCII letters and digits, '_', '-' and '.'
s.yaml:2: an epoch's name is empty; give it a name
s.yaml:3: a client "a/b" has the character '/'; names use ASCII letters and digits, '_', '-' and '.'
s.yaml:3: a client must be a name, got a list
s.yaml:5: a runnable's name "café" has the character 'é'; names use ASCII letters and digits, '_', '-' and '.'
s.yaml:6: the client of runnable "b" is empty; give it a name
s.yaml:6: the epoch of runnable "b" must be a name, got a mapping
s.yaml:6: a dependency "b c" has the character ' '; names use ASCII letters and digits, '_', '-' and '.'
s.yaml:7: a submitter "x:y" has the character ':'; names use ASCII letters and digits, '_', '-' and '.'`,
		},
		{
			name: "wrong shapes",
			src: `hyperepochs:
  - main
  - {name: h, period: 10ms, resources: cpu0, epochs: [frame]}
clients: camera
runnables:
  - [a, b]
  - {name: a, client: c, resource: cpu0, wcet: 1ms, deps: b}
`,
			want: `s.yaml:2: a hyperepoch must be a mapping of keys to values, got "main"
s.yaml:3: resources must be a list, such as [a, b], got "cpu0"
s.yaml:3: an epoch must be a mapping of keys to values, got "frame"
s.yaml:4: clients must be a list, such as [a, b], got "camera"
s.yaml:6: a runnable must be a mapping of keys to values, got a list
s.yaml:7: deps must be a list, such as [a, b], got "b"`,
		},
		{
			name: "empty values",
			src:  "hyperepochs:\nclients:\nrunnables:\n  - {name: a, client: c, resource: cpu0, wcet: }\n",
			want: `s.yaml:1: hyperepochs must be a list, such as [a, b], got nothing
s.yaml:2: clients must be a list, such as [a, b], got nothing
s.yaml:4: wcet has no value; write it such as 10ms, 250us or 1.5ms`,
		},
		{
			name: "aliases are not expanded",
			src: `x: &list [cpu0]
hyperepochs:
  - {name: h, period: 10ms, resources: *list, epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ms}
`,
			want: `s.yaml:1: unknown key "x" in the schedule; the keys are hyperepochs, clients, runnables, overrun, spin
s.yaml:3: resources must be a list, such as [a, b], got an alias`,
		},
		// Regressions of the stm trial.
		{
			// It said "is not a duration".
			name: "duration too long",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 9999999h}
  - {name: b, client: c, resource: cpu0, wcet: 2562047h47m17s}
`,
			want: `s.yaml:5: wcet "9999999h" is too long; the longest duration is 2562047h47m16.854775807s
s.yaml:6: wcet "2562047h47m17s" is too long; the longest duration is 2562047h47m16.854775807s`,
		},
		{
			// The second document was ignored.
			name: "two documents",
			src: `hyperepochs:
  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ms}
---
hyperepochs: nonsense
`,
			want: `s.yaml:6: a second YAML document starts here (after ---); a schedule is one document: remove it or put it in a file of its own`,
		},
		{
			// Regression of the STM trial (helper): a schedule whose first
			// line is indented (its "hyperepochs:" line deleted) ended
			// its first document there, and the parser's "did not find
			// expected <document start>" at the next top-level key was
			// reported as a second document after a --- that the file
			// does not have.
			name: "the first lines indented deeper than the top level",
			src: `  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
  - {name: k, period: 10ms, resources: [cpu1], epochs: [{name: g}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1ms}
`,
			want: `s.yaml:3: not valid YAML: line 3 is indented less than line 1, where the schedule begins (2 spaces); the schedule's top level starts at the beginning of the line: indent lines 1 to 2 as they belong, or add the key they are the value of (hyperepochs:, clients:, runnables:) above line 1 (the parser: line 2: did not find expected <document start>)`,
		},
		{
			// The same with a --- in the file: still the indentation,
			// not a second document.
			name: "an indented first line before a second document",
			src: `  - {name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}
clients: [c]
---
`,
			want: `s.yaml:2: not valid YAML: line 2 is indented less than line 1, where the schedule begins (2 spaces); the schedule's top level starts at the beginning of the line: indent line 1 as it belongs, or add the key it is the value of (hyperepochs:, clients:, runnables:) above line 1 (the parser: line 1: did not find expected <document start>)`,
		},
		// Regressions of the schedule-writing trial (helper): a bare
		// number in exponent form got the fix "write it as 1e3ms", which
		// is no duration either, "inf" the fix "infms"; a duration
		// misspelt with a space, a capital or a long unit name got no fix.
		{
			name: "a bare number that needs more than a unit",
			src: `hyperepochs:
  - {name: h, period: 1e1, resources: [cpu0], epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1.5e3}
  - {name: b, client: c, resource: cpu0, wcet: inf}
  - {name: d, client: c, resource: cpu0, wcet: NaN}
`,
			want: `s.yaml:2: period "1e1" has no unit; write it as 10ms, 10us or 10s
s.yaml:5: wcet "1.5e3" has no unit; write it as 1500ms, 1500us or 1500s
s.yaml:6: wcet "inf" is not a duration; write it such as 10ms, 250us or 1.5ms
s.yaml:7: wcet "NaN" is not a duration; write it such as 10ms, 250us or 1.5ms`,
		},
		{
			name: "a misspelt duration",
			src: `hyperepochs:
  - {name: h, period: 10 us, resources: [cpu0], epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, wcet: 1MS}
  - {name: b, client: c, resource: cpu0, wcet: 1msec}
  - {name: d, client: c, resource: cpu0, wcet: 2 seconds}
  - {name: e, client: c, resource: cpu0, wcet: 1e3us}
  - {name: g, client: c, resource: cpu0, wcet: 1M}
`,
			want: `s.yaml:2: period "10 us" is not a duration; write it as 10us
s.yaml:5: wcet "1MS" is not a duration; write it as 1ms
s.yaml:6: wcet "1msec" is not a duration; write it as 1ms
s.yaml:7: wcet "2 seconds" is not a duration; write it as 2s
s.yaml:8: wcet "1e3us" is not a duration; write it as 1000us
s.yaml:9: wcet "1M" is not a duration; write it such as 10ms, 250us or 1.5ms`,
		},
	})
}

// TestParsePipeline: the example schedule reads into the Spec it says,
// with every element's line.
func TestParsePipeline(t *testing.T) {
	src, err := os.ReadFile("testdata/pipeline.yaml")
	require.NoError(t, err)
	spec, err := static.Parse(src, "pipeline.yaml")
	require.NoError(t, err)
	want := &static.Spec{
		File: "pipeline.yaml",
		Hyperepochs: []static.HyperepochSpec{{
			Name: "main", Period: 10 * time.Millisecond, Line: 3,
			Resources: []string{"cpu0", "cpu1", "gpu0.stream0"},
			Epochs:    []static.EpochSpec{{Name: "frame", Frames: 1, Line: 7}},
		}},
		Clients: []static.ClientSpec{{Name: "camera", Line: 9}, {Name: "planner", Line: 9}},
		Runnables: []static.RunnableSpec{
			{Name: "grab", Client: "camera", Resource: "cpu0", WCET: time.Millisecond, Line: 11},
			{Name: "detect", Client: "camera", Resource: "gpu0.stream0", WCET: 3 * time.Millisecond, Submitter: "detect_submit", Line: 12},
			{Name: "detect_submit", Client: "camera", Resource: "cpu1", WCET: 100 * time.Microsecond, Deps: []string{"grab"}, Line: 13},
			{Name: "plan", Client: "planner", Resource: "cpu0", WCET: 2 * time.Millisecond, Deps: []string{"detect"}, Line: 14},
		},
		Overrun: static.FrameSkip,
		Spin:    static.DefaultSpin,
	}
	assert.Equal(t, want, static.WithoutKeyLines(spec))
}

// TestParseOptionalKeys: the optional keys read into the Spec, defaults
// where they are left out.
func TestParseOptionalKeys(t *testing.T) {
	spec, err := static.Parse([]byte(`hyperepochs:
  - name: h
    period: 20ms
    resources: [cpu0]
    epochs:
      - {name: fast, frames: 3, period: 5ms}
      - {name: slow}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, epoch: fast, wcet: 1.5ms, overrun: noskip, timeout: 4ms}
  - {name: b, client: c, resource: cpu0, epoch: slow, wcet: 250us, timeout: 0s}
overrun: noskip
spin: 0s
`), "o.yaml")
	require.NoError(t, err)
	assert.Equal(t, static.NoSkip, spec.Overrun)
	assert.Zero(t, spec.Spin)
	assert.Equal(t, []static.EpochSpec{{Name: "fast", Frames: 3, Period: 5 * time.Millisecond, Line: 6}, {Name: "slow", Frames: 1, Line: 7}}, spec.Hyperepochs[0].Epochs)
	assert.Equal(t, static.RunnableSpec{Name: "a", Client: "c", Resource: "cpu0", Epoch: "fast", WCET: 1500 * time.Microsecond, Overrun: static.NoSkip, Timeout: 4 * time.Millisecond, Line: 10}, spec.Runnables[0])
	assert.Equal(t, static.RunnableSpec{Name: "b", Client: "c", Resource: "cpu0", Epoch: "slow", WCET: 250 * time.Microsecond, Line: 11}, spec.Runnables[1])

	plan, err := static.Compile(spec)
	require.NoError(t, err)
	assert.Zero(t, plan.Spin, "spin: 0s never spins")
	e := plan.Hyperepochs[0].Epochs
	assert.Equal(t, 5*time.Millisecond, e[1].Period, "slow gets what fast leaves")
	assert.Equal(t, 15*time.Millisecond, e[1].Offset)
	assert.Equal(t, static.NoSkip, e[1].Runnables[0].Overrun, "the schedule's default")
}

// TestErrorText: an Error prints as file:line: msg, leaving out what it
// does not know; an ErrorList one per line.
func TestErrorText(t *testing.T) {
	assert.Equal(t, "a.yaml:3: bad", (&static.Error{File: "a.yaml", Line: 3, Msg: "bad"}).Error())
	assert.Equal(t, "line 3: bad", (&static.Error{Line: 3, Msg: "bad"}).Error())
	assert.Equal(t, "a.yaml: bad", (&static.Error{File: "a.yaml", Msg: "bad"}).Error())
	assert.Equal(t, "bad", (&static.Error{Msg: "bad"}).Error())
	list := static.ErrorList{{File: "a.yaml", Line: 1, Msg: "one"}, {File: "a.yaml", Line: 2, Msg: "two"}}
	assert.Equal(t, "a.yaml:1: one\na.yaml:2: two", list.Error())
	var e *static.Error
	require.True(t, errors.As(error(list), &e))
	assert.Equal(t, "one", e.Msg)
	assert.Len(t, list.Unwrap(), 2)
}

// TestHugeValueClipped: a value of megabytes quoted in a message is cut
// short, saying how long it is (a file of one 50 MB line printed a 50 MB
// error; found in the schedule-writing trial).
func TestHugeValueClipped(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	for name, src := range map[string]string{
		"the whole file": huge,
		"a dependency":   "hyperepochs: [{name: h, period: 10ms, resources: [cpu0], epochs: [{name: f}]}]\nclients: [c]\nrunnables:\n  - {name: a, client: c, resource: cpu0, wcet: 1ms, deps: [" + huge + "]}\n",
	} {
		err := schedErr(src)
		require.Error(t, err, name)
		msg := err.Error()
		require.Less(t, len(msg), 1000, "%s: %.300s", name, msg)
		require.Contains(t, msg, "xxxx…", name)
		require.Contains(t, msg, "1048576 bytes", name)
	}
}
