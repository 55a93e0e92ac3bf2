package procs

import "runtime"

// A Spare is the P that RaiseSpare added to GOMAXPROCS: the value it
// raised from and to, or zero values when it raised nothing.
type Spare struct {
	From, To int
}

// RaiseSpare gives the goroutines that drive a rank's communication a P
// beyond its busy workers: MPI progresses only inside MPI calls, so the
// goroutines that make them (comm/mpi's progress engine, the dist
// scheduler's progress loop, master/worker's proxies and slots) need a P
// while every worker computes, or messages wait for a task's end. When
// GOMAXPROCS is busy or fewer and the user did not set it (user: the
// GOMAXPROCS environment variable's value, see UserSet), it raises
// GOMAXPROCS to busy+1 and says so; otherwise it changes nothing.
func RaiseSpare(busy int, user string) Spare {
	if UserSet(user) {
		return Spare{}
	}
	cur := runtime.GOMAXPROCS(0)
	if cur > busy {
		return Spare{} // a P is free for them already
	}
	runtime.GOMAXPROCS(busy + 1)
	return Spare{From: cur, To: busy + 1}
}

// Restore puts GOMAXPROCS back to what it was before RaiseSpare, unless
// something changed it since (that change is kept).
func (s Spare) Restore() {
	if s.To != 0 && runtime.GOMAXPROCS(0) == s.To {
		runtime.GOMAXPROCS(s.From)
	}
}
