package static

import (
	"errors"
	"fmt"
	"time"
)

// ErrMasterLost is returned by EnterScheduler, together with ErrAborted
// (errors.Is matches both), when the client leaves a run, or its wait
// for the start, because its master is gone: its connection closed
// without a word (the master process was killed or crashed), or it
// stopped beating (on the run's board; before the start, in messages)
// for longer than the client's master timeout (stopped with SIGSTOP,
// deadlocked, starved of CPU; see WithMasterTimeout). The error names
// the master's process id, its board (before the start, its socket)
// and, for a silent master, the time since its last beat.
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
const timeoutHint = "if the master is only slow (a loaded machine), raise the client's master timeout (WithMasterTimeout; -master-timeout D of pzrun stm client, run and bench) or the master's liveness bound (-liveness, WithLiveness)"

// check returns why the master is lost when its last beat is older than
// the timeout, else "".
func (w *masterWatch) check() string {
	since := time.Duration(w.clk.now() - w.b.masterBeat())
	if since <= w.timeout {
		return ""
	}
	what, fix := stuckState(w.pid, w.board == localBoard)
	return fmt.Sprintf("%s has not beaten for %v (this client's master timeout is %v): %s. The run cannot go on without its master, and this client leaves it: %s, then start the master and the clients again; %s",
		w.who(), since.Round(time.Millisecond), w.timeout, what, fix, timeoutHint)
}

// stuckState says what became of a master that does not beat (process
// pid, 0 if unknown; local: in this process) and what to do.
func stuckState(pid int, local bool) (what, fix string) {
	what, fix = "it is stopped, deadlocked or starved of CPU", "end it"
	if local {
		return "its loop is deadlocked or starved of CPU", "end the program (SIGQUIT prints its goroutines' stacks)"
	}
	if pid == 0 {
		return what, fix
	}
	switch st := procState(pid); st {
	case 0:
	case 'T', 't':
		what, fix = fmt.Sprintf("its process is stopped (state %c: SIGSTOP, Ctrl-Z or a debugger)", st), fmt.Sprintf("end it (kill -KILL %d)", pid)
	case 'Z', 'X':
		what, fix = "its process has exited", "see its output for why"
	default:
		what = fmt.Sprintf("its process is there (state %c) but its loop does not go round: deadlocked, or starved of CPU", st)
		fix = fmt.Sprintf("end it (kill -QUIT %d prints its goroutines' stacks)", pid)
	}
	return what, fix
}

// startWatch is a client's view of its master before the start, when
// there is no board yet: the master sends a beat message every
// beatEvery of its liveness bound from the loop that waits for the
// clients (and one as it accepts this client), whether or not the
// other clients have come, so that the time since the last one measures
// the master's liveness, not the others' arrival. The watch starts with
// the first beat, which carries the master's liveness bound (the
// default timeout, as in a run) and pid. It is a plain value of data:
// the caller gives it the times.
type startWatch struct {
	option time.Duration // WithMasterTimeout; 0: the master's liveness
	pid    int           // the master's process; 0 when unknown
	sock   string        // the master's socket; "" in process
	// Set by the first beat.
	every, timeout time.Duration
	last           time.Time // the last beat's arrival
	checked        time.Time // the last check
}

// who names the master.
func (w *startWatch) who() string {
	switch {
	case w.sock == "":
		return "the master (in this process)"
	case w.pid == 0:
		return "the master on " + w.sock
	}
	return fmt.Sprintf("the master (pid %d, socket %s)", w.pid, w.sock)
}

// beat records a message from the master (a beat, or any other) at now,
// and reports whether the watch has started (a beat came).
func (w *startWatch) beat(m *message, now time.Time) bool {
	if m.Type == msgBeat && w.every == 0 {
		liveness := time.Duration(m.Liveness)
		if liveness <= 0 {
			liveness = time.Second // the master's default (buildOptions)
		}
		w.every = waitBeatEvery(liveness)
		w.timeout = w.option
		if w.timeout == 0 {
			w.timeout = liveness
		}
		w.timeout = max(w.timeout, 4*w.every)
		if w.pid == 0 {
			w.pid = m.MasterPID
		}
	}
	w.last, w.checked = now, now
	return w.every != 0
}

// waitBeatEvery is how often a master with the liveness bound liveness
// beats to its clients before the start: as on the board (beatEvery),
// but not more often than every 10 ms, since each beat is a message.
func waitBeatEvery(liveness time.Duration) time.Duration {
	return max(beatEvery(liveness), 10*time.Millisecond)
}

// check returns why the master is lost at now, or "": its last beat is
// older than the timeout. Time this client itself did not run (stopped,
// starved: a check that comes more than two beats after the last) is
// not counted against the master, whose beats wait in the socket
// meanwhile. The caller checks about twice per beat.
func (w *startWatch) check(now time.Time) string {
	if w.every == 0 {
		return "" // no beat yet: no master watches this client yet
	}
	if gap := now.Sub(w.checked); gap > 2*w.every {
		w.last = w.last.Add(gap - w.every)
		if w.last.After(now) {
			w.last = now
		}
	}
	w.checked = now
	since := now.Sub(w.last)
	if since <= w.timeout {
		return ""
	}
	what, fix := stuckState(w.pid, w.sock == "")
	return fmt.Sprintf("%s has not beaten for %v while this client waited for the start (this client's master timeout is %v; a master waiting for other clients beats all the same): %s. This client leaves: %s, then start the master and the clients again; %s",
		w.who(), since.Round(time.Millisecond), w.timeout, what, fix, timeoutHint)
}

// gone says why the client leaves when the master's connection closed
// before the start without a word (err: how the read ended).
func (w *startWatch) gone(err error) string {
	var st byte // 0: cannot tell (no pid, not Linux)
	if w.sock != "" && w.pid != 0 {
		st = procState(w.pid)
		for end := time.Now().Add(exitWait); st != 'Z' && st != 'X' && st != 0 && time.Now().Before(end); st = procState(w.pid) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	switch {
	case w.sock == "":
		return fmt.Sprintf("%s closed the connection before the start without a word (%v): it ended; see the program's output", w.who(), err)
	case st == 'Z' || st == 'X':
		return fmt.Sprintf("%s exited before the start without a word: it was killed (SIGKILL, or the kernel's OOM killer: see dmesg) or it crashed (see its output). Start the master again, and this client again (either may start first)", w.who())
	case st == 0:
		return fmt.Sprintf("%s closed the connection before the start without a word (%v): it exited, killed (SIGKILL, the OOM killer) or crashed; see its output, then start the master again, and this client again (either may start first)", w.who(), err)
	}
	return fmt.Sprintf("%s closed the connection before the start without a word (%v; its process is still there, state %c): see its output, then start the master and this client again", w.who(), err, st)
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
