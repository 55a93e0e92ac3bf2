package static

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// echoProcess maps the board at path and answers each ping (done word 0)
// with a pong (done word 1) until the ping is ^0.
func echoProcess(path string) int {
	b, err := openBoardFile(path, 2, 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer b.close()
	runtime.LockOSThread()
	ping, pong := b.doneWord(0), b.doneWord(1)
	var last uint64
	for {
		v := b.load(ping)
		if v == last {
			continue
		}
		last = v
		if v == ^uint64(0) {
			return 0
		}
		b.store(pong, v)
	}
}

// BenchmarkBoardSignal measures a dependency signalled through the board:
// one op is a ping and its pong, so half of ns/op is the one-way
// latency of a runnable's end reaching a waiting runnable, in one process
// (threads) and across processes (the shared mapping).
func BenchmarkBoardSignal(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("needs two cores: both sides spin")
	}
	run := func(b *testing.B, bd *board) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		ping, pong := bd.doneWord(0), bd.doneWord(1)
		b.ResetTimer()
		for i := 1; i <= b.N; i++ {
			bd.store(ping, uint64(i))
			for bd.load(pong) != uint64(i) {
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/signal")
		bd.store(ping, ^uint64(0))
	}
	b.Run("threads", func(b *testing.B) {
		bd := newBoard(2, 1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread()
			var last uint64
			for {
				v := bd.load(bd.doneWord(0))
				if v == last {
					continue
				}
				last = v
				if v == ^uint64(0) {
					return
				}
				bd.store(bd.doneWord(1), v)
			}
		}()
		run(b, bd)
		<-done
	})
	b.Run("processes", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "board")
		bd, err := createBoardFile(path, 2, 1)
		if err != nil {
			b.Fatal(err)
		}
		defer bd.close()
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(exe, "-test.run", "^$")
		cmd.Env = append(os.Environ(), "PZ_STM_TEST_ECHO="+path)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		run(b, bd)
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
	})
}
