//go:build mpi

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pzgo/pz/comm/commbench"
	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/internal/launch"
	"github.com/pzgo/pz/internal/peerdir"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler/static"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMpirun runs the MPI build of pzrun under the real mpirun.
func TestMpirun(t *testing.T) {
	lau, _ := launch.For(mpi.Library())
	mpirun, err := lau.Run()
	if err != nil {
		t.Skip("mpirun not installed")
	}
	bin := buildPzrun(t, mpiTags()...)
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("hello-%d", n), func(t *testing.T) {
			out, err := exec.Command(mpirun, append(lau.Args(n), bin, "hello")...).Output()
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			require.Len(t, lines, n, string(out))
			for i, l := range lines {
				assert.True(t, strings.HasPrefix(l, fmt.Sprintf("hello from rank %d of %d on ", i, n)), l)
				assert.True(t, strings.HasSuffix(l, "(mpi backend)"), l)
			}
		})
	}
	t.Run("info-json", func(t *testing.T) {
		out, err := exec.Command(mpirun, append(lau.Args(2), bin, "info", "--json")...).Output()
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		require.Len(t, lines, 2)
		for i, l := range lines {
			var rec struct {
				Rank       int    `json:"rank"`
				GOMAXPROCS int    `json:"gomaxprocs"`
				Reason     string `json:"gomaxprocs_reason"`
			}
			require.NoError(t, json.Unmarshal([]byte(l), &rec))
			assert.Equal(t, i, rec.Rank)
			assert.GreaterOrEqual(t, rec.GOMAXPROCS, 1)
			assert.NotEmpty(t, rec.Reason)
		}
	})
	t.Run("stm-ranks-as-clients", func(t *testing.T) {
		src := writeSchedule(t, pipelineYAML)
		runPath := filepath.Join(t.TempDir(), "run.json")
		out, err := exec.Command(mpirun, append(lau.Args(2), bin, "stm", "run", src, "-frames", "20", "-o", runPath, "-liveness", "10s")...).CombinedOutput()
		require.NoError(t, err, string(out))
		f, err := os.Open(runPath)
		require.NoError(t, err)
		defer f.Close()
		run, err := static.ReadRun(f)
		require.NoError(t, err)
		pids := map[int]bool{}
		for _, c := range run.Clients {
			pids[c.PID] = true
		}
		assert.Len(t, pids, 2, "each MPI process runs one client")
		for _, rr := range run.Runnables {
			assert.Len(t, rr.Seq, 20, rr.Name)
		}
	})
	t.Run("launch-program", func(t *testing.T) {
		prog := filepath.Join(t.TempDir(), "allreduce")
		out, err := exec.Command("go", "build", "-tags", "mpi", "-o", prog, "../../examples/allreduce").CombinedOutput()
		require.NoError(t, err, string(out))
		out, err = exec.Command(mpirun, append(lau.Args(2), bin, prog)...).CombinedOutput()
		require.NoError(t, err, string(out))
		assert.Contains(t, string(out), "allreduce over 2 ranks (mpi backend)")
	})
	t.Run("n-under-mpirun", func(t *testing.T) {
		out, err := exec.Command(mpirun, append(lau.Args(2), bin, "-n", "2", "hello")...).CombinedOutput()
		require.Error(t, err)
		assert.Contains(t, string(out), "let mpirun choose the ranks")
	})
}

// TestBenchCommMPIWithPeer runs `pzrun bench comm -backend mpi`, which
// starts its MPI library's launcher itself and runs the C peer, on that
// library, in the same invocation (Open MPI, or MPICH under -tags
// mpi,mpich).
func TestBenchCommMPIWithPeer(t *testing.T) {
	lau, _ := launch.For(mpi.Library())
	if _, err := lau.Cc(); err != nil {
		t.Skip(err)
	}
	peer := peerdir.Find("mpi")
	if peer == "" {
		t.Skip("../shared/peers/mpi not found beside the checkout")
	}
	bin := buildPzrun(t, mpiTags()...)
	out, err := exec.Command(bin, "bench", "comm", "-backend", "mpi", "-ranks", "2", "-sizes", "8,65536", "-scale", "0.02", "-peer", peer).Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 6)
	for _, l := range lines {
		var r struct {
			Backend string  `json:"backend"`
			Ranks   int     `json:"ranks"`
			Median  float64 `json:"median_us"`
			Peer    float64 `json:"peer_median_us"`
			Ratio   float64 `json:"ratio"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		assert.Equal(t, "mpi", r.Backend)
		assert.Equal(t, 2, r.Ranks)
		assert.Greater(t, r.Peer, 0.0, "peer figure present: %s", l)
		assert.InDelta(t, r.Median/r.Peer, r.Ratio, 0.01*r.Ratio+1e-3)
	}

	// Two rounds: the peer beside each, and the median of their ratios.
	out, err = exec.Command(bin, "bench", "comm", "-backend", "mpi", "-ranks", "2", "-ops", "allreduce", "-sizes", "8", "-scale", "0.02", "-rounds", "2", "-peer", peer).Output()
	require.NoError(t, err)
	var r struct {
		Rounds int     `json:"rounds"`
		Paired float64 `json:"paired_ratio"`
		Peer   float64 `json:"peer_median_us"`
	}
	require.NoError(t, json.Unmarshal(out, &r), string(out))
	assert.Equal(t, 2, r.Rounds)
	assert.Greater(t, r.Paired, 0.0)
	assert.Greater(t, r.Peer, 0.0)
}

// TestBenchCommMPIForms: bench comm's MPI lines say which form of the
// collectives they measured (collective_form), and -blocking chooses it on
// every rank, both in the job pzrun starts (-backend mpi) and in a job
// started with mpirun; without the flag the ranks take what a program
// gets: PZ_COMM_BLOCKING, non-blocking by default. (Since comm/mpi's
// collectives took the non-blocking form by default, the command measured
// that form and its lines did not say so.)
func TestBenchCommMPIForms(t *testing.T) {
	lau, _ := launch.For(mpi.Library())
	bin := buildPzrun(t, mpiTags()...)
	bench := []string{"bench", "comm", "-ops", "allreduce", "-sizes", "8", "-scale", "0.01", "-peer="}
	cases := []struct {
		name, env string // env: PZ_COMM_BLOCKING
		flags     []string
		mpirun    bool // under mpirun, not -backend mpi
		want      string
	}{
		{"default", "", nil, false, commbench.FormNonblocking},
		{"flag", "", []string{"-blocking"}, false, commbench.FormBlocking},
		{"env", "1", nil, false, commbench.FormBlocking},
		{"flag-over-env", "1", []string{"-blocking=false"}, false, commbench.FormNonblocking},
		{"mpirun-default", "", nil, true, commbench.FormNonblocking},
		{"mpirun-flag", "", []string{"-blocking"}, true, commbench.FormBlocking},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var cmd *exec.Cmd
			args := append(slices.Clone(bench), c.flags...)
			if c.mpirun {
				var err error
				cmd, err = lau.Command(t.Context(), 2, append([]string{bin}, args...)...)
				if err != nil {
					t.Skip(err)
				}
			} else {
				cmd = exec.CommandContext(t.Context(), bin, append(args, "-backend", "mpi", "-ranks", "2")...)
			}
			cmd.Env = append(os.Environ(), "PZ_COMM_BLOCKING="+c.env)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			require.NoError(t, err, stderr.String())
			var r commbench.Result
			require.NoError(t, json.Unmarshal(out, &r), string(out))
			assert.Equal(t, "mpi", r.Backend)
			assert.Equal(t, c.want, r.CollectiveForm, string(out))
			assert.Greater(t, r.MedianUS, 0.0)
		})
	}
}

// A job ends without the MPI library's complaints about what pz left
// allocated at MPI_Finalize: MPICH printed "yaksa: 2 leaked handle pool
// objects" on every rank of every job (the agreement step's and
// MinLoc/MaxLoc's types, never freed).
func TestMPIFinalizeLeavesNothingAllocated(t *testing.T) {
	lau, _ := launch.For(mpi.Library())
	bin := buildPzrun(t, mpiTags()...)
	cmd, err := lau.Command(t.Context(), 2, bin, "hello")
	if err != nil {
		t.Skip(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	assert.Equal(t, 2, strings.Count(string(out), "hello from rank"), string(out))
	assert.NotContains(t, stderr.String(), "leaked")
}

// mpiTags are the build tags of a pzrun against the MPI library this test
// binary is built against, so that its jobs run under that library's
// launcher.
func mpiTags() []string {
	if mpi.Library() == launch.MPICH {
		return []string{"mpi", "mpich"}
	}
	return []string{"mpi"}
}

// A Ctrl-C of pzrun bench comm -backend mpi while its own mpirun runs
// stops that job with SIGTERM: mpirun passes it on to the ranks and
// cleans up after them (killed, it left $TMPDIR/ompi.* and the ranks'
// /dev/shm/vader_segment.*); pzrun exits 130.
func TestBenchCommMPIBackendSIGINTCleansUp(t *testing.T) {
	if mpi.Library() != launch.OpenMPI {
		t.Skip("looks at Open MPI's session directory and segments")
	}
	lau, _ := launch.For(mpi.Library())
	if _, err := lau.Run(); err != nil {
		t.Skip(err)
	}
	bin := buildPzrun(t, mpiTags()...)
	cmd := exec.Command(bin, "bench", "comm", "-backend", "mpi", "-ranks", "2", "-ops", "allreduce", "-sizes", "8,1048576", "-scale", "20", "-peer=")
	_, stderr := interruptMPIJob(t, cmd)
	assert.Contains(t, stderr, "the MPI job was stopped: pzrun: interrupt received")
}

// Under the real mpirun, a usage error (a bad flag; flags that every
// rank refuses alike) is said once, by rank 0, and every process exits
// 2 without MPI_Abort: mpirun's status is 2.
func TestMpirunUsageErrorOnce(t *testing.T) {
	lau, _ := launch.For(mpi.Library())
	if _, err := lau.Run(); err != nil {
		t.Skip(err)
	}
	bin := buildPzrun(t, mpiTags()...)
	noMPI := filepath.Join(t.TempDir(), "allreduce")
	out, err := exec.Command("go", "build", "-o", noMPI, "../../examples/allreduce").CombinedOutput()
	require.NoError(t, err, string(out))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cholesky", "-nosuchflag"}, "pzrun cholesky: flag provided but not defined: -nosuchflag"},
		{[]string{"cholesky", "-n", "1000", "-b", "256"}, "pzrun cholesky: invalid options: matrix size 1000 is not a multiple of block size 256 (try -n 1024)"},
		{[]string{"cholesky", "-grid", "2x2"}, "a 2 x 2 process grid for 2 ranks"},
		{[]string{"contexts", "-workers", "1"}, "pzrun contexts: invalid options: -workers 1; two contexts need at least 2 workers"},
		// A program to launch: every rank of the node said it.
		{[]string{"./nosuch-program"}, "pzrun (rank 0): stat ./nosuch-program: no such file or directory"},
		{[]string{"-n", "2", "/bin/true"}, "pzrun: -n 2 given under an MPI launcher"},
		// A pz program built without -tags mpi: every rank started it,
		// and each refused to run.
		{[]string{noMPI}, "pzrun (rank 0): " + noMPI + " was built without -tags mpi"},
	} {
		cmd, err := lau.Command(t.Context(), 2, append([]string{bin}, c.args...)...)
		require.NoError(t, err)
		cmd.Env = append(os.Environ(), commbench.PeerEnv()...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%v: %s", c.args, out)
		assert.Equal(t, 2, ee.ExitCode(), "%v: %s", c.args, out)
		assert.Equal(t, 1, strings.Count(string(out), c.want), "%v: said once: %s", c.args, out)
		assert.NotContains(t, string(out), "MPI_ABORT", "%v", c.args)
		assert.NotContains(t, string(out), "pz: rank", "%v", c.args)
	}
}

// Under the real mpirun, a SIGTERM to one rank while the runtime is set
// up (before MPI_Init, or after it and before the ranks' hardware
// exchange: the rank pauses there, runtimeview.EnvTestPause, and says
// so) ends the job at once with status 1 and the signalled rank's
// reason, as a signal during the app's run does; it used to finish and
// wait in MPI_Finalize while rank 0 waited in the exchange, until
// PZ_COMM_TIMEOUT.
func TestMpirunEarlySignalEndsJob(t *testing.T) {
	lau, _ := launch.For(mpi.Library())
	mpirun, err := lau.Run()
	if err != nil {
		t.Skip("mpirun not installed")
	}
	bin := buildPzrun(t, mpiTags()...)
	for _, point := range []string{"init", "exchange"} {
		t.Run(point, func(t *testing.T) {
			cmd := exec.Command(mpirun, append(lau.Args(2), bin, "cholesky", "-n", "8192", "-b", "256")...)
			cmd.Env = append(os.Environ(), runtimeview.EnvTestPause+"=1:"+point, "PZ_COMM_TIMEOUT=5m",
				"OMPI_MCA_btl_vader_single_copy_mechanism=none")
			stderr, err := cmd.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			paused := regexp.MustCompile(`^pz: test hook: rank 1 \(pid (\d+)\) paused at ` + point + `$`)
			pid := make(chan int, 1)
			var errb strings.Builder
			drained := make(chan struct{})
			go func() {
				defer close(drained)
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					errb.WriteString(sc.Text() + "\n")
					if m := paused.FindStringSubmatch(sc.Text()); m != nil {
						p, _ := strconv.Atoi(m[1])
						pid <- p
					}
				}
			}()
			exited := make(chan error, 1)
			go func() { <-drained; exited <- cmd.Wait() }()
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			select {
			case p := <-pid:
				require.NoError(t, syscall.Kill(p, syscall.SIGTERM))
			case err := <-exited:
				t.Fatalf("the job ended before rank 1 paused: %v\n%s", err, errb.String())
			case <-time.After(2 * time.Minute):
				t.Fatalf("rank 1 did not pause:\n%s", errb.String())
			}
			signalled := time.Now()
			select {
			case err = <-exited:
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
				t.Fatalf("the job still ran 60 s after rank 1 was signalled:\n%s", errb.String())
			}
			out := errb.String()
			t.Logf("ended %v after the signal:\n%s", time.Since(signalled).Round(time.Millisecond), out)
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, out)
			assert.Equal(t, 1, ee.ExitCode(), out)
			assert.Contains(t, out, "pz: rank 1 of 2 failed: ")
			assert.Regexp(t, `pz: rank 1 of 2 failed: .*: pzrun: terminated received\n`, out)
			assert.Contains(t, out, "pz: aborting the job (MPI_Abort)")
			assert.NotContains(t, out, "PZ_COMM_TIMEOUT", "a rank waited for the other")
		})
	}
}

// A SIGTERM to mpirun that runs one rank (a job's usual way to end: the
// batch system's, timeout's) ends the job within seconds, and the rank
// says why on stderr: Open MPI sends the rank SIGTERM and SIGKILLs it a
// later, while the rank's MPI_Finalize waits for the daemon that is
// ending the job, so what pzrun printed after finalizing was lost
// (status 1 and nothing on stderr): the rank says the stop when it comes.
func TestMpirunOneRankSIGTERMSaysWhy(t *testing.T) {
	// The watchdog's lines say the factorization runs: a tile task takes
	// longer than 20 ms.
	mpirunSIGTERMSaysWhy(t, 1, []string{"cholesky", "-n", "8192", "-b", "1024"}, []string{"PZ_WATCHDOG=20ms"},
		func(line string) bool { return strings.Contains(line, "watchdog: no task finished") },
		"pzrun cholesky: SIGTERM received: stopping\n")
}

// TestMpirunTwoRanksSIGTERMSaysWhy: with several ranks, rank 0 says the
// stop when it comes. bench comm looks at its context between sizes
// only, and Open MPI SIGKILLs the ranks a second after its SIGTERM, long
// before abortAfterStop's grace runs out: mpirun -n 2 pzrun bench comm,
// TERM to mpirun, gave status 1 and nothing on stderr. Its progress line
// (every 10 s on a pipe; there was none) says when it runs.
func TestMpirunTwoRanksSIGTERMSaysWhy(t *testing.T) {
	mpirunSIGTERMSaysWhy(t, 2, []string{"bench", "comm", "-peer=", "-ops", "allreduce,allgather,bcast,gatherv,alltoallv,halo,scan,sendrecv", "-sizes", "8,16777216", "-scale", "50"}, nil,
		func(line string) bool { return strings.HasPrefix(line, "bench comm sizes: ") },
		"pzrun bench comm: SIGTERM received: stopping\n")
}

// mpirunSIGTERMSaysWhy runs pzrun args under mpirun with ranks ranks
// (env added), sends mpirun SIGTERM once a line of stderr is ready, and
// checks that the job ends within 30 s, failing, with want on stderr and
// no goroutine dump. The wait for ready has no bound of its own (under
// load the first line took minutes): a job that never prints one ends at
// go test's -timeout.
func mpirunSIGTERMSaysWhy(t *testing.T, ranks int, args, env []string, ready func(line string) bool, want string) {
	t.Helper()
	lau, _ := launch.For(mpi.Library())
	mpirun, err := lau.Run()
	if err != nil {
		t.Skip("mpirun not installed")
	}
	bin := buildPzrun(t, mpiTags()...)
	cmd := exec.Command(mpirun, append(append(lau.Args(ranks), bin), args...)...)
	cmd.Env = append(append(os.Environ(), "OMPI_MCA_btl_vader_single_copy_mechanism=none"), env...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	running := make(chan struct{})
	var errb strings.Builder // read after drained
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		first := running // closed once, at the first ready line
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			errb.WriteString(sc.Text() + "\n")
			if first != nil && ready(sc.Text()) {
				close(first)
				first = nil
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { <-drained; exited <- cmd.Wait() }()
	select {
	case <-running:
	case err := <-exited:
		t.Fatalf("the job ended before it said it runs: %v\n%s", err, errb.String())
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("the job still ran 30 s after mpirun was signalled:\n%s", errb.String())
	}
	out := errb.String()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, out)
	assert.NotEqual(t, 0, ee.ExitCode(), out)
	assert.Contains(t, out, want)
	assert.NotContains(t, out, "goroutine ")
}
