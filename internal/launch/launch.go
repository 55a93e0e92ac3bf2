package launch

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrNotBuiltWithMPI is returned by Check when the process was started by an
// MPI launcher with more than one rank but the binary has no MPI support.
var ErrNotBuiltWithMPI = errors.New("launch: started by an MPI launcher with several ranks, but this binary was built without MPI support")

// Info is what the environment says about the job. Unknown numbers are -1.
type Info struct {
	// Launcher names the variables that were found: "openmpi", "pmix",
	// "pmi" (MPICH Hydra, Intel MPI, Slurm PMI) or "mvapich2"; "" when the
	// process was not started by a known MPI launcher.
	Launcher string
	// Size is the number of ranks in the job (MPI_COMM_WORLD), or -1.
	Size int
	// Rank is this process's rank, or -1.
	Rank int
	// LocalSize is the number of ranks on this node, or -1.
	LocalSize int
	// LocalRank is this process's index among them, or -1.
	LocalRank int
}

// Launched reports whether a known MPI launcher started the process.
func (i Info) Launched() bool { return i.Launcher != "" }

// MultiRank reports whether the job certainly has more than one rank: its
// size is known and above one, or this process's rank is above zero.
func (i Info) MultiRank() bool { return i.Size > 1 || i.Rank > 0 }

// launcherVar names, for one launcher, the variables for size, rank, local
// size and local rank ("" = the launcher sets none).
type launcherVar struct {
	name                     string
	size, rank, lsize, lrank string
}

// launchers lists the known launchers in order of preference.
func launchers() []launcherVar {
	return []launcherVar{
		{"openmpi", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
		{"mvapich2", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_RANK"},
		{"pmi", "PMI_SIZE", "PMI_RANK", "MPI_LOCALNRANKS", "MPI_LOCALRANKID"},
		{"pmix", "", "PMIX_RANK", "", ""},
	}
}

// Detect reads the launcher's variables through env (os.Getenv in
// production). Values that are not non-negative integers count as absent.
// When several launchers' variables are present, the first of Open MPI,
// MVAPICH2, PMI, PMIx wins and missing numbers are filled from the others.
func Detect(env func(string) string) Info {
	info := Info{Size: -1, Rank: -1, LocalSize: -1, LocalRank: -1}
	num := func(k string) int {
		if k == "" {
			return -1
		}
		v, err := strconv.Atoi(env(k))
		if err != nil || v < 0 {
			return -1
		}
		return v
	}
	fill := func(dst *int, k string) bool {
		v := num(k)
		if v >= 0 && *dst < 0 {
			*dst = v
		}
		return v >= 0
	}
	for _, l := range launchers() {
		found := fill(&info.Size, l.size)
		found = fill(&info.Rank, l.rank) || found
		found = fill(&info.LocalSize, l.lsize) || found
		found = fill(&info.LocalRank, l.lrank) || found
		if found && info.Launcher == "" {
			info.Launcher = l.name
		}
	}
	return info
}

// Check returns an error wrapping ErrNotBuiltWithMPI when env shows an MPI
// launch with more than one rank and mpiBuilt is false: each process would
// otherwise believe it is rank 0 of 1 and the job would run N copies of the
// same work. The message says how to rebuild. It returns nil otherwise,
// including for a single-rank launch (mpirun -n 1) without MPI support.
func Check(env func(string) string, mpiBuilt bool) error {
	info := Detect(env)
	if mpiBuilt || !info.MultiRank() {
		return nil
	}
	size := "several"
	if info.Size > 0 {
		size = strconv.Itoa(info.Size)
	}
	return fmt.Errorf("%w: the %s launcher started %s ranks (this is rank %d); "+
		"rebuild with `go build -tags mpi` (needs the MPI development files, "+
		"e.g. Debian's libopenmpi-dev: `pkg-config --cflags ompi` must work), "+
		"or run without mpirun to use in-process ranks",
		ErrNotBuiltWithMPI, info.Launcher, size, info.Rank)
}
