package hardware

import "golang.org/x/sys/unix"

// osMemTotal returns the machine's RAM in bytes (sysctl hw.memsize) when
// Discover reads the real root of macOS, which has no /proc/meminfo; 0
// for a fake root (WithRoot) or when the sysctl fails.
func osMemTotal(real bool) uint64 {
	if !real {
		return 0
	}
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0
	}
	return n
}
