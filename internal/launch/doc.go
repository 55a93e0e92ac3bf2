// Package launch recognizes an MPI launcher from the environment it gives
// its processes, so that a binary built without MPI support never runs N
// copies of rank 0.
//
// mpirun, mpiexec and srun start each rank with variables describing the
// job: Open MPI sets OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_RANK and
// OMPI_COMM_WORLD_LOCAL_SIZE; PMIx-based launchers set PMIX_RANK; MPICH's
// Hydra, Intel MPI and Slurm's PMI set PMI_SIZE, PMI_RANK, MPI_LOCALNRANKS;
// MVAPICH2 sets MV2_COMM_WORLD_SIZE. [Detect] reads them through an
// injectable lookup function and [Check] turns "launched with more than one
// rank, but built without -tags mpi" into an error that says how to rebuild:
//
//	if err := launch.Check(os.Getenv, mpi.Available()); err != nil {
//		fmt.Fprintln(os.Stderr, err)
//		os.Exit(2)
//	}
package launch
