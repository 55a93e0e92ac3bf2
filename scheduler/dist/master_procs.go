package dist

import (
	"fmt"

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

// raiseSpareP gives the goroutines that exchange tasks with the other
// ranks a P of their own while RunMaster runs (procs.RaiseSpare): on
// the master its proxies, which send tasks and wait for their results,
// on a worker rank its slots, which receive tasks and send their
// results, beyond this rank's workers (the master's own cores, a worker
// rank's slots), when on is set (EnvMasterSpareP) and the user did not
// set GOMAXPROCS (userGOMAXPROCS, the environment variable's value).
// Its Restore puts GOMAXPROCS back.
func raiseSpareP(workers int, on bool, userGOMAXPROCS string) procs.Spare {
	if !on {
		return procs.Spare{}
	}
	return procs.RaiseSpare(workers, userGOMAXPROCS)
}
