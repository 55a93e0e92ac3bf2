package comm

import "context"

// SplitShared returns a communicator of the ranks of c that share this
// node's memory, ordered by key (then by rank in c), as MPI's
// MPI_Comm_split_type with MPI_COMM_TYPE_SHARED: the ranks that can use
// shared-memory techniques, or size themselves to the node. A backend
// whose ranks are in one process (comm/local) shares all of them. Every
// rank of c must call it; free the result with Free.
func SplitShared(ctx context.Context, c Comm, key int) (Comm, error) {
	if s, ok := c.(interface {
		SplitShared(ctx context.Context, key int) (Comm, error)
	}); ok {
		return s.SplitShared(ctx, key)
	}
	return c.Split(ctx, 0, key)
}
