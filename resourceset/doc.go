// Package resourceset describes what one rank has, RAM, GPUs and CPU
// cores, and lets any rank address it as the root of a collective.
//
// A parallel program has one ResourceSet per rank, and every rank can look
// at every rank's set: runtimeview builds them from hardware descriptions
// that each rank discovers once (package hardware) and sends to all the
// others once (Exchange, one AllGatherValues). After that, asking about
// another rank's hardware costs no communication:
//
//	rs := rt.ResourceSet(2)
//	fmt.Println(rs.Host().Hostname, rs.RAM().TotalBytes(), len(rs.GPUs()))
//
// # What a resource set reports
//
//   - RAM: total and available bytes of the rank's host, honouring a
//     cgroup memory limit (a container's limit, not the host's size); the
//     raw host and cgroup figures are in RAM.Memory.
//   - GPUs: each CUDA device the rank's process sees, with name, UUID,
//     total and free memory, SM count, compute capability and PCI bus id.
//   - CPU: logical and physical cores, sockets, NUMA nodes, caches, and the
//     CPUs and cgroup CPU quota the rank's process may use.
//   - Host: host name, kernel, OS and architecture.
//
// The figures are a snapshot taken when the rank's hardware was discovered
// (at runtimeview.New); free memory changes afterwards.
//
// # Roots
//
// A rank's RAM (or its ResourceSet) is a Root: the rank that all-to-one and
// one-to-all collectives gather to, reduce to, broadcast from and scatter
// from. Every rank of the communicator makes the same call with the same
// root:
//
//	parts, ok, err := resourceset.Gather(ctx, rt.ResourceSet(2).RAM(), mine)
//	if ok { /* only on rank 2: parts[i] is rank i's mine */ }
//
// Calls whose result exists only at the root (Gather, Reduce, GatherValues,
// ReduceValue) return ok == false and a nil or zero result on every other
// rank, with a nil error. Numeric slices travel as raw memory (Gather,
// Reduce, Bcast, Scatter, and BcastValue of a numeric slice or scalar);
// the other Values forms, and BcastValue of other types, go through comm's
// codec (comm.Encode). The codec carries a struct's exported fields only:
// unexported ones arrive as their zero value on the receiving ranks
// (BcastValue's root returns its own v, unexported fields and all), so a
// struct whose unexported fields matter differs between the ranks. Funcs
// and channels do not encode: an error on every rank.
//
// # Errors
//
// What the ranks must agree on is compared before data moves: the root,
// a numeric slice's element type, the length where every rank passes the
// same one (Reduce, Bcast), and the op. A disagreement, or a root outside
// the communicator, is an error on every rank. Two mistakes show only on
// the rank where they arise, which alone returns an error (the others
// return normally, the collective completed): a value that does not decode
// as the receiving rank's T (GatherValues and ReduceValue at the root,
// BcastValue and ScatterValues elsewhere) and a nil f given to ReduceValue
// on some ranks only. Every rank must pass the same T to a Values form.
//
// # Logging
//
// ResourceSet.Logger is the calling process's local logger: unlike
// RuntimeView.Logger, which prints only on the root, it prints on every
// rank.
package resourceset
