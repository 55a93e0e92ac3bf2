package static

import (
	"errors"
	"fmt"
	"time"
)

// ErrMasterLost is returned by EnterScheduler, together with ErrAborted
// (errors.Is matches both), when the client leaves a run because its
// master is gone: its connection closed mid-run (the master process was
// killed or crashed), or it stopped beating on the run's board for
// longer than the client's master timeout (stopped with SIGSTOP,
// deadlocked, starved of CPU; see WithMasterTimeout). The error names
// the master's process id, its board and, for a silent master, the time
// since its last beat.
var ErrMasterLost = errors.New("static: the master was lost")

// lostError is ErrAborted and ErrMasterLost, in words that already say
// both.
type lostError struct{ msg string }

func (e *lostError) Error() string   { return e.msg }
func (e *lostError) Unwrap() []error { return []error{ErrAborted, ErrMasterLost} }

// masterWatch is a client's view of its master during a run: the
// master beats on the board (board.beat) every beatEvery of its
// liveness bound, and the client, checking as often from its watcher
// goroutine, never from a resource thread, takes it for lost once its
// last beat is older than the timeout.
type masterWatch struct {
	b       *board
	clk     clock
	timeout time.Duration
	every   time.Duration // how often to check: the master's beat
	pid     int           // the master's process; 0 when it did not say
	board   string        // the board's file, or localBoard
}

// newMasterWatch sets the client's watch of the master that sent start:
// the timeout is the client's (WithMasterTimeout) or the master's
// liveness bound, and at least four of the master's beats.
func (c *Client) newMasterWatch(start *message, b *board, clk clock) *masterWatch {
	liveness := time.Duration(start.Liveness)
	if liveness <= 0 {
		liveness = time.Second // the master's default (buildOptions)
	}
	every := beatEvery(liveness)
	timeout := c.masterTimeout
	if timeout == 0 {
		timeout = liveness
	}
	return &masterWatch{b: b, clk: clk, timeout: max(timeout, 4*every), every: every, pid: start.MasterPID, board: start.Board}
}

// who names the master.
func (w *masterWatch) who() string {
	switch {
	case w.board == localBoard:
		return "the master (in this process)"
	case w.pid == 0:
		return "the master of board " + w.board
	}
	return fmt.Sprintf("the master (pid %d, board %s)", w.pid, w.board)
}

// timeoutHint says how to give a slow master more time.
const timeoutHint = "if the master is only slow (a loaded machine), raise the client's master timeout (WithMasterTimeout; pzrun stm client -master-timeout D) or the master's liveness bound (-liveness, WithLiveness)"

// check returns why the master is lost when its last beat is older than
// the timeout, else "".
func (w *masterWatch) check() string {
	since := time.Duration(w.clk.now() - w.b.masterBeat())
	if since <= w.timeout {
		return ""
	}
	what, fix := "it is stopped, deadlocked or starved of CPU", "end it"
	if w.board == localBoard {
		what, fix = "its loop is deadlocked or starved of CPU", "end the program (SIGQUIT prints its goroutines' stacks)"
	} else if w.pid != 0 {
		switch st := procState(w.pid); st {
		case 0:
		case 'T', 't':
			what, fix = fmt.Sprintf("its process is stopped (state %c: SIGSTOP, Ctrl-Z or a debugger)", st), fmt.Sprintf("end it (kill -KILL %d)", w.pid)
		case 'Z', 'X':
			what, fix = "its process has exited", "see its output for why"
		default:
			what = fmt.Sprintf("its process is there (state %c) but its loop does not go round: deadlocked, or starved of CPU", st)
			fix = fmt.Sprintf("end it (kill -QUIT %d prints its goroutines' stacks)", w.pid)
		}
	}
	return fmt.Sprintf("%s has not beaten for %v (this client's master timeout is %v): %s. The run cannot go on without its master, and this client leaves it: %s, then start the master and the clients again; %s",
		w.who(), since.Round(time.Millisecond), w.timeout, what, fix, timeoutHint)
}

// exitWait bounds how long goneReason waits for the master's process to
// be seen to exit: its socket closes as it exits, a moment before the
// kernel marks it a zombie.
const exitWait = 200 * time.Millisecond

// goneReason says why the client leaves when the master's connection
// closed mid-run without a word.
func (w *masterWatch) goneReason() string {
	if w.board == localBoard || w.pid == 0 {
		return w.who() + " closed the connection mid-run without saying why; start the master and the clients again"
	}
	st := procState(w.pid)
	for end := time.Now().Add(exitWait); st != 'Z' && st != 'X' && st != 0 && time.Now().Before(end); st = procState(w.pid) {
		time.Sleep(5 * time.Millisecond)
	}
	if st == 'Z' || st == 'X' {
		return fmt.Sprintf("%s exited mid-run without a word: it was killed (SIGKILL, or the kernel's OOM killer: see dmesg) or it crashed (see its output). The run cannot go on without its master: start the master again, then the clients (the next master on that directory replaces the board)", w.who())
	}
	return fmt.Sprintf("%s closed the connection mid-run without saying why (its process is still there): see its output, then start the master and the clients again", w.who())
}
