package procs

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"

	"github.com/pzgo/pz/internal/plural"
)

// Input is everything Decide looks at. Zero values mean "unknown".
type Input struct {
	// UserGOMAXPROCS is the GOMAXPROCS environment variable. When it holds
	// a value the Go runtime accepts (a positive integer) the user decided
	// and Decide changes nothing. The runtime ignores any other value (0,
	// -1, "abc") and so does Decide, saying so in its reason.
	UserGOMAXPROCS string
	// Current is the current GOMAXPROCS value.
	Current int
	// LocalRanks is the number of ranks (processes) on this node, counting
	// this one. 0 or 1 means this process is alone.
	LocalRanks int
	// AllowedCPUs is the number of CPUs in this process's affinity mask.
	AllowedCPUs int
	// OnlineCPUs is the number of CPUs online on the node.
	OnlineCPUs int
	// Quota is the cgroup CPU limit in cores (e.g. 2.5), 0 when unlimited.
	// It applies to the whole cgroup, which all local ranks are assumed to
	// share.
	Quota float64
	// MaskShare is this rank's share of the node computed from the real
	// affinity masks of every local rank (see MaskShare), 0 when they are
	// unknown (Decide then estimates the sharing from the counts).
	MaskShare float64
}

// Decision is the outcome of Decide.
type Decision struct {
	// Procs is the GOMAXPROCS value to use (>= 1). It equals Input.Current
	// when Change is false.
	Procs int
	// Change reports whether GOMAXPROCS should be set to Procs.
	Change bool
	// Reason explains the decision in one line.
	Reason string
}

// Decide computes this rank's share of the node. It is a pure function.
// A GOMAXPROCS the user set to a positive integer is left alone; any other
// value is ignored, as the Go runtime ignores it.
//
// With the local ranks' affinity masks known (MaskShare > 0) the share is
// MaskShare rounded down. Otherwise, let allowed be the CPUs of the
// affinity mask (or the online CPUs when unknown): the ranks sharing the
// mask are estimated as LocalRanks * allowed / online, rounded and at
// least 1 (all of them when no binding is in effect, one when each rank is
// bound to its own cores), and the share is allowed / sharing. Either is
// further capped by Quota / LocalRanks (rounded up), and never below 1.
func Decide(in Input) Decision {
	d := decide(in)
	if in.UserGOMAXPROCS != "" {
		if _, ok := userGOMAXPROCS(in.UserGOMAXPROCS); !ok {
			d.Reason = fmt.Sprintf("GOMAXPROCS=%q ignored, as the Go runtime ignores it (not a positive integer); %s", in.UserGOMAXPROCS, d.Reason)
		}
	}
	return d
}

func decide(in Input) Decision {
	if n, ok := userGOMAXPROCS(in.UserGOMAXPROCS); ok {
		reason := fmt.Sprintf("GOMAXPROCS=%s set by the user; left alone", in.UserGOMAXPROCS)
		if cpus := in.AllowedCPUs; cpus > 0 && n > cpus {
			reason = fmt.Sprintf("GOMAXPROCS=%s set by the user, more than the %s this rank may run on; left alone", in.UserGOMAXPROCS, plural.Of(cpus, "CPU"))
		}
		return Decision{Procs: in.Current, Reason: reason}
	}
	local := max(in.LocalRanks, 1)
	online := in.OnlineCPUs
	allowed := in.AllowedCPUs
	switch {
	case allowed <= 0 && online <= 0:
		return Decision{Procs: in.Current, Reason: "CPU count unknown; left alone"}
	case allowed <= 0:
		allowed = online
	case online < allowed:
		online = allowed
	}
	var share int
	var reason string
	if in.MaskShare > 0 {
		share = max(int(in.MaskShare+1e-9), 1)
		reason = fmt.Sprintf("affinity masks of %s: %.2f of this rank's %s are its own", localRanks(local), in.MaskShare, plural.Of(allowed, "CPU"))
	} else {
		sharing := max(int(math.Round(float64(local)*float64(allowed)/float64(online))), 1)
		share = max(allowed/sharing, 1)
		reason = fmt.Sprintf("%s shared by %s (estimated)", plural.Of(allowed, "allowed CPU"), localRanks(sharing))
		if sharing == 1 && local > 1 {
			reason = fmt.Sprintf("%s bound to this rank (%s, estimated)", plural.Of(allowed, "CPU"), localRanks(local))
		}
	}
	if in.Quota > 0 {
		q := max(int(math.Ceil(in.Quota/float64(local)-1e-9)), 1)
		if q < share {
			share = q
			reason = fmt.Sprintf("cgroup quota %.2f CPUs shared by %s", in.Quota, localRanks(local))
		}
	}
	return Decision{Procs: share, Change: share != in.Current, Reason: reason}
}

// localRanks is "1 local rank" or "N local ranks".
func localRanks(n int) string {
	if n == 1 {
		return "1 local rank"
	}
	return fmt.Sprintf("%d local ranks", n)
}

// Report is what Apply did.
type Report struct {
	Input
	Decision
	// Before and After are GOMAXPROCS before and after Apply.
	Before, After int
}

// String formats r in one line, e.g.
// "GOMAXPROCS 16 -> 4: 16 allowed CPUs shared by 4 local ranks".
func (r Report) String() string {
	return fmt.Sprintf("GOMAXPROCS %d -> %d: %s", r.Before, r.After, r.Reason)
}

// Gather reads the Input for this process: the GOMAXPROCS environment
// variable, the current setting, the affinity mask, the online CPUs and the
// cgroup quota. localRanks is the number of ranks on this node (from the
// launcher's environment or an MPI shared-memory split). Errors reading the
// affinity mask or the cgroup leave those fields zero (unknown).
func Gather(localRanks int) Input {
	in := Input{
		UserGOMAXPROCS: os.Getenv("GOMAXPROCS"),
		Current:        runtime.GOMAXPROCS(0),
		LocalRanks:     localRanks,
		OnlineCPUs:     OnlineCPUs(),
	}
	if n, err := AllowedCPUs(); err == nil {
		in.AllowedCPUs = n
	}
	if q, ok := CgroupCPUQuota(); ok {
		in.Quota = q
	}
	return in
}

// Apply sizes GOMAXPROCS to this rank's share of the node (see Decide) and
// reports what it did. It leaves GOMAXPROCS alone when the user set the
// GOMAXPROCS environment variable to a positive integer. GOMAXPROCS is process-wide: call Apply
// from the code that owns the process, once, before starting work. Setting
// it also stops the Go runtime's own automatic GOMAXPROCS updates.
func Apply(localRanks int) Report {
	return ApplyInput(Gather(localRanks))
}

// ApplyInput is Apply with the Input given (Gather's, completed by the
// caller, e.g. with MaskShare from the local ranks' masks).
func ApplyInput(in Input) Report {
	d := Decide(in)
	r := Report{Input: in, Decision: d, Before: in.Current, After: in.Current}
	if d.Change {
		runtime.GOMAXPROCS(d.Procs)
		r.After = d.Procs
	}
	return r
}

// UserSet reports whether s, the value of the GOMAXPROCS environment
// variable, is one the Go runtime takes (a positive int32): the user then
// sized GOMAXPROCS, and pz leaves it, and what it derives from it, alone.
// A value the runtime ignores (unset, 0, -1, "abc") pz ignores too.
func UserSet(s string) bool {
	_, ok := userGOMAXPROCS(s)
	return ok
}

// userGOMAXPROCS parses the GOMAXPROCS environment variable as the Go
// runtime does: a decimal int32, optionally signed, greater than zero.
// The runtime ignores any other value (0, -1, "abc", " 3", 99999999999)
// and keeps its default, so ok is false for them.
func userGOMAXPROCS(s string) (n int, ok bool) {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil || v <= 0 {
		return 0, false
	}
	return int(v), true
}
