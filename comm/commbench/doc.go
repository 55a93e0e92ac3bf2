// Package commbench measures pz's collectives against C MPI on the same
// machine, in one invocation, and prints one JSON object per line:
//
//	{"op":"allreduce","bytes":8,"ranks":2,"backend":"mpi","median_us":0.25,"peer_median_us":0.20,"ratio":1.25}
//
// Measure times the operations of Config.Ops (Ops lists them: by default
// AllReduce (float64 sum), AllGather and Bcast (root 0); also a
// user-defined reduction, Gatherv, Alltoallv, Scan, ReduceScatterBlock,
// AllReduceMaxLoc, Iallreduce and ring exchanges by Isend/Irecv,
// persistent requests and Sendrecv) at 8 B, 1 KiB, 64 KiB, 1 MiB and
// 16 MiB (Config.Sizes) on any comm.Comm, the way the C peer
// ../shared/peers/mpi/collbench.c does: every iteration is Barrier; t0; op;
// t1, the time of an iteration is the maximum over ranks, and the median of
// those is reported, after warm-up. RunPeer compiles collbench.c with mpicc
// into a temporary folder and runs it under mpirun with the same rank count;
// Attach adds its medians and the ratio to pz's results.
//
// `pzrun bench comm` runs both in one invocation, for the embedded backend
// (`pzrun -n 4 bench comm`: in-process ranks) or for the MPI backend
// (`pzrun bench comm -backend mpi -ranks 4`: it launches itself under
// mpirun; build it with -tags mpi). Under mpirun directly
// (`mpirun -n 4 pzrun bench comm`) it measures without the peer, since an
// MPI rank cannot start another mpirun.
package commbench
