package dist

import (
	"fmt"
	"runtime"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/internal/procs"
)

// EnvMasterSpareP names the environment variable that says whether
// RunMaster gives the master's proxies a P of their own (see RunMaster,
// "Threads"): unset, empty or "1" it does, "0" it does not. Any other
// value fails RunMaster on the master, and, told by the master, on every
// worker rank.
const EnvMasterSpareP = "PZ_MASTER_SPARE_P"

// spareOption reads EnvMasterSpareP through getenv: whether the master
// may raise GOMAXPROCS for its proxies.
func spareOption(getenv func(string) string) (bool, error) {
	switch v := getenv(EnvMasterSpareP); v {
	case "", "1":
		return true, nil
	case "0":
		return false, nil
	default:
		return false, fmt.Errorf("%w: %s=%q: want 1 (the goroutines that exchange the tasks between the ranks get a P of their own, the default) or 0 (they share the workers' Ps)", comm.ErrInvalidArg, EnvMasterSpareP, v)
	}
}

// spareP is a P raiseSpareP added for the goroutines that exchange a
// rank's tasks with the other ranks: the GOMAXPROCS it raised from and
// to, or zero values when it raised nothing.
type spareP struct {
	from, to int
}

// raiseSpareP gives the goroutines that exchange tasks with the other
// ranks a P of their own while RunMaster runs: on the master its proxies,
// which send tasks and wait for their results, on a worker rank its
// slots, which receive tasks and send their results. It raises
// GOMAXPROCS by one when this rank's workers (the master's own cores, a
// worker rank's slots) take every P (GOMAXPROCS <= workers), on is set
// (EnvMasterSpareP) and the user did not set GOMAXPROCS (userGOMAXPROCS,
// the environment variable's value, which pz leaves alone). restore puts
// GOMAXPROCS back.
func raiseSpareP(workers int, on bool, userGOMAXPROCS string) spareP {
	if !on || procs.UserSet(userGOMAXPROCS) {
		return spareP{}
	}
	cur := runtime.GOMAXPROCS(0)
	if cur > workers {
		return spareP{} // a P is free for them already
	}
	runtime.GOMAXPROCS(cur + 1)
	return spareP{from: cur, to: cur + 1}
}

// restore puts GOMAXPROCS back to what it was before raiseSpareP,
// unless something changed it meanwhile (that change is kept).
func (s spareP) restore() {
	if s.to != 0 && runtime.GOMAXPROCS(0) == s.to {
		runtime.GOMAXPROCS(s.from)
	}
}
