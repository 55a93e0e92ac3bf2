package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/internal/apps/benchtasks"
	"github.com/pzgo/pz/internal/cbuild"
	"github.com/pzgo/pz/internal/fakecuda"
)

// The field names of every app's --json output are an interface, and
// docs/pzrun.md is where they are promised: each app's field table there
// follows a line "<!-- json-fields: APP[, APP] -->". A table's first
// column names its fields in backquotes (several to a row); a field of
// the objects in a list is "list[].field", of an object "object.field".
// An optional column "in" says which lines a row is for (see
// docFieldKinds). TestJSONFieldsMatchDocs reads those tables, so that a
// field added to the output without its row, or a row whose field is no
// longer printed, fails here rather than drift apart.

// A docField is one field of a table in docs/pzrun.md.
type docField struct {
	name, in string
}

var (
	jsonFieldsMarker = regexp.MustCompile(`^<!-- json-fields: (.+) -->$`)
	backquoted       = regexp.MustCompile("`([^`]*)`")
	fieldName        = regexp.MustCompile(`^[a-z][a-z0-9_]*((\[\])?\.[a-z][a-z0-9_]*)*$`)
	unescapedBar     = regexp.MustCompile(`(^|[^\\])\|`)
)

// docJSONFields reads the field tables of docs/pzrun.md, by app.
func docJSONFields(t *testing.T) map[string][]docField {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "pzrun.md"))
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	cells := func(l string) []string {
		l = strings.TrimSpace(l)
		l = strings.TrimPrefix(strings.TrimSuffix(l, "|"), "|")
		// Split on the bars that are not escaped (\| in a cell).
		var out []string
		last := 0
		for _, m := range unescapedBar.FindAllStringIndex(l, -1) {
			bar := m[1] - 1
			out = append(out, strings.TrimSpace(l[last:bar]))
			last = bar + 1
		}
		return append(out, strings.TrimSpace(l[last:]))
	}
	docs := map[string][]docField{}
	for i := 0; i < len(lines); i++ {
		m := jsonFieldsMarker.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			continue
		}
		require.Less(t, i+2, len(lines), "docs/pzrun.md:%d: a marker without a table", i+1)
		head := cells(lines[i+1])
		require.True(t, strings.HasPrefix(lines[i+1], "|"), "docs/pzrun.md:%d: the field table must follow its marker at once", i+2)
		require.Equal(t, "field", head[0], "docs/pzrun.md:%d: the table's first column is the field", i+2)
		in := slices.Index(head, "in")
		var fields []docField
		for j := i + 3; j < len(lines) && strings.HasPrefix(lines[j], "|"); j++ {
			row := cells(lines[j])
			require.Len(t, row, len(head), "docs/pzrun.md:%d: %s", j+1, lines[j])
			names := backquoted.FindAllStringSubmatch(row[0], -1)
			require.NotEmpty(t, names, "docs/pzrun.md:%d: no `field` in the first column", j+1)
			for _, n := range names {
				require.Regexp(t, fieldName, n[1], "docs/pzrun.md:%d: not a field name", j+1)
				f := docField{name: n[1]}
				if in >= 0 {
					f.in = row[in]
				}
				fields = append(fields, f)
			}
		}
		require.NotEmpty(t, fields, "docs/pzrun.md:%d: an empty field table", i+1)
		for _, app := range strings.Split(m[1], ",") {
			app = strings.TrimSpace(app)
			require.NotContains(t, docs, app, "docs/pzrun.md:%d: a second table for %s", i+1, app)
			docs[app] = fields
		}
	}
	return docs
}

// docFieldKinds returns the values of the "in" column whose rows apply
// to line l of app: cholesky's and gemm's rows are for "both" or the app
// itself, contexts' for "all" and "runs" or "summary" by the line's mode.
func docFieldKinds(app string, l map[string]any) []string {
	switch app {
	case "cholesky", "gemm":
		return []string{"both", app}
	case "contexts":
		if l["mode"] == "summary" {
			return []string{"all", "summary"}
		}
		return []string{"all", "runs"}
	}
	return []string{""}
}

// docAppKinds returns the values of the "in" column of the rows that
// apply to some line of app.
func docAppKinds(app string) []string {
	if app == "contexts" {
		return []string{"all", "runs", "summary"}
	}
	return docFieldKinds(app, nil)
}

// flattenFields adds to seen the names of v's fields: "a" for a field,
// "a.b" for a field of an object, "a[].b" for a field of the objects of a
// list.
func flattenFields(prefix string, v any, seen map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			seen[prefix+k] = true
			flattenFields(prefix+k+".", c, seen)
		}
	case []any:
		p := strings.TrimSuffix(prefix, ".") + "[]."
		for _, c := range x {
			if m, ok := c.(map[string]any); ok {
				flattenFields(p, m, seen)
			}
		}
	}
}

// jsonOnly checks that stdout is JSON objects, one a line, and nothing
// else, and returns them.
func jsonOnly(t *testing.T, what, stdout string) []map[string]any {
	t.Helper()
	require.NotEmpty(t, stdout, "%s: nothing on stdout", what)
	require.True(t, strings.HasSuffix(stdout, "\n"), "%s: the last line is not ended: %q", what, stdout)
	var recs []map[string]any
	for i, l := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		require.True(t, strings.HasPrefix(l, "{") && json.Valid([]byte(l)), "%s: stdout line %d is not one JSON object: %q", what, i+1, l)
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &r), "%s: line %d", what, i+1)
		recs = append(recs, r)
	}
	return recs
}

// TestJSONFieldsMatchDocs runs every app that has a --json output (but
// stm's commands, checked with static-schedules.md) at the smallest sizes,
// on two ranks where the app takes ranks, and compares the fields of
// every line with the app's table in docs/pzrun.md: a field printed but
// not documented fails, and so does a documented one that no run
// printed, but for those that need what this machine may lack (a GPU,
// a C compiler, the C MPI peer), named in maybeAbsent with the reason.
func TestJSONFieldsMatchDocs(t *testing.T) {
	docs := docJSONFields(t)
	_, ccErr := cbuild.Compiler()
	peerFile := filepath.Join(t.TempDir(), "starpu.txt")
	require.NoError(t, os.WriteFile(peerFile, []byte("starpu_c_nodata_eager_total 2.0 us/task\n"), 0o644))

	type appRuns struct {
		app  string
		runs [][]string
		env  map[string]string // the getenv the runs see
		// cuda, with a C compiler: runs on the stand-in CUDA driver.
		cuda [][]string
		// extra records, printed by the app's library (what a pzrun run
		// of it would take too long for: bench tasks' grain case).
		extra func(t *testing.T) string
		// maybeAbsent: documented fields a run here may not print, and
		// why (given stderr of every run).
		maybeAbsent func(stderr string) map[string]string
	}
	apps := []appRuns{
		{app: "hello", runs: [][]string{{"-n", "2", "hello", "--json"}}},
		{
			app:  "info",
			runs: [][]string{{"-n", "2", "info", "--json"}},
			env:  map[string]string{"PZ_NSIM": "2", "PZ_SIM_MEMORY": "64MiB"},
			maybeAbsent: func(string) map[string]string {
				m := map[string]string{"warnings": "only when the hardware discovery could not read something (TestInfoWarnings)"}
				for _, f := range []string{"index", "name", "uuid", "memory_total_bytes", "memory_free_bytes", "sm_count", "compute_capability", "pci_bus_id"} {
					m["gpus[]."+f] = "a GPU's fields: none without a CUDA GPU and NVML"
				}
				return m
			},
		},
		{
			app: "bench comm",
			runs: [][]string{
				{"-n", "2", "bench", "comm", "-ops", "allreduce", "-sizes", "8", "-scale", "0.01", "-rounds", "2", "--json"}, // accepted, as on every app
			},
			maybeAbsent: func(stderr string) map[string]string {
				m := map[string]string{
					"c2c_ns":          "sampled with -backend mpi only, under mpirun (TestMeasureRoundsSamples)",
					"collective_form": "the MPI backend's only (TestBenchCommMPIForms)",
				}
				if strings.Contains(stderr, "peer skipped") {
					for _, f := range []string{"peer_median_us", "ratio", "paired_ratio"} {
						m[f] = "the C MPI peer did not run here"
					}
				}
				return m
			},
		},
		{
			app: "bench tasks",
			runs: [][]string{
				{"bench", "tasks", "-cases", "indep", "-policies", "eager", "-submitters", "1", "-tasks", "200", "-rounds", "2", "-peer-file", peerFile},
				{"bench", "tasks", "-cases", "chain", "-policies", "eager", "-submitters", "1", "-tasks", "200", "-rounds", "1", "-batch", "8", "-starpu=false", "-openmp=false", "--json"},
				{"bench", "tasks", "-cases", "handles4", "-policies", "eager", "-submitters", "1", "-tasks", "200", "-rounds", "1", "-submitters-work", "-starpu=false", "-openmp=false"},
			},
			// The grain case runs 5,000 tasks per worker of up to 256 µs
			// through pzrun, seconds: its records come from the library
			// that pzrun prints them with, at a few tasks.
			extra: func(t *testing.T) string {
				var b bytes.Buffer
				_, err := benchtasks.Run(context.Background(), benchtasks.Options{
					Policies: []string{"eager"}, Cases: []benchtasks.Case{benchtasks.CaseGrain},
					Submitters: []int{1}, Rounds: 1, Grains: []int{1}, GrainTasks: 10,
				}, &b)
				require.NoError(t, err)
				return b.String()
			},
			maybeAbsent: func(stderr string) map[string]string {
				m := map[string]string{"c2c_ns": "absent on one core or when every sample found the machine busy"}
				if strings.Contains(stderr, "no OpenMP figures") {
					for _, f := range []string{"openmp_peer", "openmp_value", "openmp_ratio", "openmp_paired_ratio"} {
						m[f] = "no compiler builds the OpenMP peer here"
					}
				}
				return m
			},
		},
		{
			app: "cholesky",
			runs: [][]string{
				{"cholesky", "-n", "128", "-b", "64", "-sim", "1", "--check", "--json"},
				{"-n", "2", "cholesky", "-n", "128", "-b", "64", "-workers", "1", "--check", "--json"},
			},
			cuda: [][]string{{"cholesky", "-n", "128", "-b", "64", "-precision", "64", "-workers", "1", "-cuda", "1", "-cuda-reference", "--json"}},
		},
		{
			app: "gemm",
			runs: [][]string{
				{"gemm", "-n", "128", "-b", "64", "-sim", "1", "--check", "--json"},
				{"-n", "2", "gemm", "-n", "128", "-b", "64", "-workers", "1", "--check", "--json"},
			},
			cuda: [][]string{{"gemm", "-n", "128", "-b", "64", "-precision", "64", "-workers", "1", "-cuda", "1", "-cuda-reference", "--json"}},
		},
		{
			app:  "contexts",
			runs: [][]string{{"contexts", "-small", "128", "-large", "256", "-b", "64", "-workers", "2", "-hypervisor", "idle,gflops_rate", "-json"}},
		},
	}
	// Every table in the docs is checked: a table for an app that is not
	// run here (a renamed app) fails too.
	var names []string
	for _, a := range apps {
		names = append(names, a.app)
	}
	var documented []string
	for app := range docs {
		documented = append(documented, app)
	}
	sort.Strings(names)
	sort.Strings(documented)
	require.Equal(t, names, documented, "the apps run here and the field tables of docs/pzrun.md")

	if ccErr == nil {
		fakecuda.Setenv(t, 1, 16<<20)
		fakecuda.SetDelay(t, 0)
		fakecuda.SetLibraries(t, fakecuda.Instance(t))
		t.Setenv("PZ_PERFMODEL_DIR", t.TempDir())
	}
	for _, a := range apps {
		t.Run(strings.ReplaceAll(a.app, " ", "_"), func(t *testing.T) {
			fields := docs[a.app]
			var stderrs strings.Builder
			var recs []map[string]any
			runs := a.runs
			if ccErr == nil {
				runs = append(runs, a.cuda...)
			}
			for _, args := range runs {
				var out, errb bytes.Buffer
				code := run(testCtx(t), args, &out, &errb, func(k string) string { return a.env[k] })
				require.Equal(t, 0, code, "%v: %s", args, errb.String())
				stderrs.WriteString(errb.String())
				recs = append(recs, jsonOnly(t, strings.Join(args, " "), out.String())...)
			}
			if a.extra != nil {
				recs = append(recs, jsonOnly(t, a.app+" (library)", a.extra(t))...)
			}
			seen := map[string]bool{} // field + "\x00" + kind
			for i, r := range recs {
				kinds := docFieldKinds(a.app, r)
				printed := map[string]bool{}
				flattenFields("", r, printed)
				for f := range printed {
					ok := false
					for _, d := range fields {
						if d.name == f && slices.Contains(kinds, d.in) {
							ok, seen[f+"\x00"+d.in] = true, true
						}
					}
					assert.True(t, ok, "%s line %d prints %q, which docs/pzrun.md does not document (in %q): %v", a.app, i+1, f, kinds, r)
				}
			}
			absent := map[string]string{}
			if a.maybeAbsent != nil {
				absent = a.maybeAbsent(stderrs.String())
			}
			if ccErr != nil {
				for _, f := range []string{"pinned", "gpu_reference_gflops", "gpu_reference_ratio"} {
					absent[f] = "needs the stand-in CUDA driver, which needs a C compiler"
				}
			}
			for _, d := range fields {
				if !slices.Contains(docAppKinds(a.app), d.in) {
					continue // another app's row (gemm's max_rel_err for cholesky)
				}
				if seen[d.name+"\x00"+d.in] {
					continue
				}
				if why, ok := absent[d.name]; ok {
					t.Logf("%s: %s not printed here: %s", a.app, d.name, why)
					continue
				}
				assert.Fail(t, "documented but never printed", "%s: docs/pzrun.md documents %q (in %q), which no run printed", a.app, d.name, d.in)
			}
		})
	}
}
