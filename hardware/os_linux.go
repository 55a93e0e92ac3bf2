package hardware

// osCPUs returns nil: on Linux the online CPUs come from sysfs or
// /proc/cpuinfo alone, so that a fake root (WithRoot) describes the whole
// machine. os_other.go is the counterpart for other systems.
func osCPUs(real bool) []int {
	return nil
}
