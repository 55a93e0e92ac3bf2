//go:build !amd64 || purego

package comm

// reduceVector has no vector kernels on this platform: the portable Go
// kernels do all the work.
func reduceVector(op Op, dt Datatype, dst, a, b []byte) int { return 0 }
