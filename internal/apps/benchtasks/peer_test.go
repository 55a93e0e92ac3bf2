package benchtasks

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdata/results-2core.txt is ../shared/peers/starpu/results-2core.txt:
// one run of the peer script on a 2-core machine.
func loadPeer(t *testing.T) Peer {
	t.Helper()
	f, err := os.Open("testdata/results-2core.txt")
	require.NoError(t, err)
	defer f.Close()
	p, err := ParsePeer(f)
	require.NoError(t, err)
	return p
}

func TestParsePeerFile(t *testing.T) {
	p := loadPeer(t)
	assert.Equal(t, PeerValue{2.043, "us/task"}, p["starpu_c_nodata_lws_total"])
	assert.Equal(t, PeerValue{0.885, "ratio"}, p["tasks_size_overhead_eff_16us_2cpu_lws"])
	assert.Equal(t, PeerValue{162.6, "GFLOP/s"}, p["cholesky_implicit_obblas_N4096_tile256_lws"])
	_, ok := p["cholesky_2concurrent_2ctx_exit"]
	assert.True(t, ok, "integer values parse")
	for k := range p {
		assert.False(t, strings.HasPrefix(k, "#"), "comment parsed as %q", k)
	}
}

func TestParsePeerSkipsFailuresRejectsGarbage(t *testing.T) {
	p, err := ParsePeer(strings.NewReader("# c\n\na 1.5 us/task\nb FAIL(rc=1) us/task\n"))
	require.NoError(t, err)
	assert.Equal(t, Peer{"a": {1.5, "us/task"}}, p)
	_, err = ParsePeer(strings.NewReader("a 1 us/task\nnot a figure line\n"))
	assert.True(t, errors.Is(err, ErrBadPeerFile), "got %v", err)
}

// Every case the peer script measures maps to a figure present in its
// output, for each shared policy, on 2 and 1 workers.
func TestPeerNamesExistInPeerScriptOutput(t *testing.T) {
	p := loadPeer(t)
	for _, pol := range []string{"eager", "ws", "lws", "dmda"} {
		for _, w := range []int{2, 1} {
			for _, c := range []Case{CaseIndep, CaseChain} {
				name := PeerName(c, pol, w, 0)
				_, ok := p[name]
				assert.True(t, ok, "%s %s %d workers: %q not in the peer file", c, pol, w, name)
			}
		}
		for _, g := range []int{1, 16, 256} {
			for _, w := range []int{1, 2} {
				name := PeerName(CaseGrain, pol, w, g)
				_, ok := p[name]
				assert.True(t, ok, "grain %d %s: %q not in the peer file", g, pol, name)
			}
		}
	}
	assert.Equal(t, "starpu_c_nodata_ws_total", PeerName(CaseIndep, "ws", 2, 0))
	assert.Equal(t, "tasks_overhead_rw4chain_dmda", PeerName(CaseHandles4, "dmda", 2, 0))
	assert.Equal(t, "", PeerName(CaseIndep, "prio", 2, 0), "StarPU's prio is not pz's")
}

func TestParseStarPUOutputs(t *testing.T) {
	// Output of tasks_size_overhead -i 500 -c 1 -C 2 -s 1 -t 1 -T 256 -f 16.
	out := `# tasks : 500 buffers : 0 total_nbuffers : 0
# ncpus	1 iters(us)	total(s)	16 iters(us)	total(s)	256 iters(us)	total(s)
"seq"	1       	0.000564	17       	0.008393	257       	0.128332
1	1	0.005021	16	0.009147	256	0.129324
2	1	0.010701	16	0.005179	256	0.065151
`
	p := parseSizeOverhead(out, "lws")
	require.Len(t, p, 6)
	// 500 tasks × 16 µs on 2 CPUs printed as 0.005179 s per CPU.
	assert.InDelta(t, 500*16e-6/(2*0.005179), p["tasks_size_overhead_eff_16us_2cpu_lws"].Value, 1e-12)
	assert.InDelta(t, 500*256e-6/(1*0.129324), p["tasks_size_overhead_eff_256us_1cpu_lws"].Value, 1e-12)

	v, ok := perTask("#tasks : 1000\nPer task submit: 8.48 usecs\nTotal: 0.015279 secs\nPer task: 15.279389 usecs\n")
	assert.True(t, ok)
	assert.Equal(t, 15.279389, v)
	_, ok = perTask("nothing")
	assert.False(t, ok)
}
