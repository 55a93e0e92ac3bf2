//go:build !darwin

package hardware

// osMemTotal returns 0: on Linux the RAM comes from /proc/meminfo alone
// (a fake root, WithRoot, describes its whole machine), and other systems
// than macOS (mem_darwin.go) give pz no figure.
func osMemTotal(bool) uint64 { return 0 }
