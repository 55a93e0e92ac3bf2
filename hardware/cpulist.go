package hardware

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrBadCPUList is returned by ParseCPUList for input that is not a Linux
// CPU list.
var ErrBadCPUList = errors.New("hardware: malformed CPU list")

// maxCPUID bounds the CPU numbers ParseCPUList accepts, so that a corrupt
// file ("0-4000000000") cannot make it allocate gigabytes. Linux's NR_CPUS
// is at most 8192 today; 1<<20 leaves ample room.
const maxCPUID = 1 << 20

// ParseCPUList returns the CPUs of a Linux CPU list such as "0-3,8,10-11"
// (the format of /sys/devices/system/cpu/online, cpulist and
// shared_cpu_list files and of Cpus_allowed_list in /proc/PID/status),
// sorted and without duplicates. Blank input gives an empty list and no
// error. Malformed input gives an error wrapping ErrBadCPUList.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var cpus []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 || a > maxCPUID {
			return nil, fmt.Errorf("%w: %q", ErrBadCPUList, s)
		}
		b := a
		if isRange {
			b, err = strconv.Atoi(hi)
			if err != nil || b < a || b > maxCPUID {
				return nil, fmt.Errorf("%w: %q", ErrBadCPUList, s)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

// FormatCPUList is the inverse of ParseCPUList: it writes cpus (in any
// order, duplicates allowed) as a Linux CPU list with ranges, e.g.
// "0-3,8,10-11". An empty list gives "".
func FormatCPUList(cpus []int) string {
	s := slices.Clone(cpus)
	slices.Sort(s)
	s = slices.Compact(s)
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(s[j]))
		}
		i = j + 1
	}
	return b.String()
}
