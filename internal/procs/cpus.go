package procs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"strconv"
	"strings"
)

// ErrBadCPUList is returned by ParseCPUList for malformed input.
var ErrBadCPUList = errors.New("procs: malformed CPU list")

// ParseCPUList counts the CPUs in a Linux CPU list such as "0-3,8,10-11"
// (the format of /sys/devices/system/cpu/online and cpuset files).
func ParseCPUList(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	n := 0
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0, fmt.Errorf("%w: %q", ErrBadCPUList, s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, fmt.Errorf("%w: %q", ErrBadCPUList, s)
			}
		}
		n += b - a + 1
	}
	return n, nil
}

// CgroupCPUQuota returns the CPU limit of this process's cgroup in cores
// (quota / period, e.g. 1.5) and true, or 0 and false when there is no limit
// or it cannot be read. It understands cgroup v2 (cpu.max) and v1
// (cpu.cfs_quota_us / cpu.cfs_period_us) and takes the smallest limit of the
// process's cgroup and its ancestors.
func CgroupCPUQuota() (float64, bool) {
	return CgroupCPUQuotaFS(os.DirFS("/"))
}

// CgroupCPUQuotaFS is CgroupCPUQuota reading from fsys, which stands for the
// root directory (it reads proc/self/cgroup and sys/fs/cgroup/...). It
// exists for tests and for package hardware.
func CgroupCPUQuotaFS(fsys fs.FS) (float64, bool) {
	data, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	best := math.Inf(1)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// Lines are "hierarchy-ID:controller-list:cgroup-path".
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		p := strings.TrimPrefix(f[2], "/")
		if f[0] == "0" && f[1] == "" {
			for _, root := range []string{"sys/fs/cgroup", "sys/fs/cgroup/unified"} {
				best = math.Min(best, walkUp(fsys, root, p, readV2))
			}
			continue
		}
		if !hasController(f[1], "cpu") {
			continue
		}
		for _, root := range []string{"sys/fs/cgroup/cpu", "sys/fs/cgroup/cpu,cpuacct", "sys/fs/cgroup/cpuacct,cpu"} {
			best = math.Min(best, walkUp(fsys, root, p, readV1))
		}
	}
	if math.IsInf(best, 1) {
		return 0, false
	}
	return best, true
}

func hasController(list, c string) bool {
	for x := range strings.SplitSeq(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}

// walkUp applies read to root/p and each ancestor up to root and returns
// the smallest limit found (+Inf if none).
func walkUp(fsys fs.FS, root, p string, read func(fs.FS, string) float64) float64 {
	best := math.Inf(1)
	for {
		best = math.Min(best, read(fsys, path.Join(root, p)))
		if p == "" || p == "." || p == "/" {
			return best
		}
		p = path.Dir(p)
		if p == "." {
			p = ""
		}
	}
}

// readV2 parses cpu.max: "max 100000" or "150000 100000".
func readV2(fsys fs.FS, dir string) float64 {
	b, err := fs.ReadFile(fsys, path.Join(dir, "cpu.max"))
	if err != nil {
		return math.Inf(1)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 || f[0] == "max" {
		return math.Inf(1)
	}
	period := 100000.0 // the kernel's default when the file gives none
	if len(f) > 1 {
		if v, err := strconv.ParseFloat(f[1], 64); err == nil && v > 0 {
			period = v
		}
	}
	return quota(f[0], period)
}

// readV1 parses cpu.cfs_quota_us (-1 = unlimited) and cpu.cfs_period_us.
func readV1(fsys fs.FS, dir string) float64 {
	q, err := fs.ReadFile(fsys, path.Join(dir, "cpu.cfs_quota_us"))
	if err != nil {
		return math.Inf(1)
	}
	p, err := fs.ReadFile(fsys, path.Join(dir, "cpu.cfs_period_us"))
	if err != nil {
		return math.Inf(1)
	}
	period, err := strconv.ParseFloat(strings.TrimSpace(string(p)), 64)
	if err != nil || period <= 0 {
		return math.Inf(1)
	}
	return quota(strings.TrimSpace(string(q)), period)
}

func quota(s string, period float64) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		return math.Inf(1)
	}
	return v / period
}
