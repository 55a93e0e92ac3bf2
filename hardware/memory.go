package hardware

import (
	"bufio"
	"bytes"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// Memory is the RAM this process can use. The effective figures honour a
// cgroup memory limit; the raw host and cgroup figures are kept beside
// them. Byte counts are 0 when unknown.
type Memory struct {
	// TotalBytes is the effective total ("total_bytes"): the host's
	// MemTotal, lowered to the cgroup limit when one is set.
	TotalBytes uint64 `json:"total_bytes"`
	// AvailableBytes is the effective available memory ("available_bytes"):
	// the host's MemAvailable, lowered to the cgroup's headroom when a limit
	// is set. The headroom of a cgroup is its limit minus its usage, where
	// page cache the kernel can drop (inactive_file) is not counted as used,
	// as container runtimes compute a working set; with nested limits the
	// smallest headroom wins.
	AvailableBytes uint64 `json:"available_bytes"`
	// HostTotalBytes and HostAvailableBytes are MemTotal and MemAvailable
	// from /proc/meminfo ("host_total_bytes", "host_available_bytes"). On
	// kernels without MemAvailable it is estimated as MemFree + Buffers +
	// Cached.
	HostTotalBytes     uint64 `json:"host_total_bytes"`
	HostAvailableBytes uint64 `json:"host_available_bytes"`
	// CgroupVersion is 1 or 2 for the cgroup hierarchy whose memory
	// controller governs this process, 0 when none was found
	// ("cgroup_version").
	CgroupVersion int `json:"cgroup_version"`
	// CgroupLimitBytes is the smallest memory limit of the process's
	// cgroup and its ancestors, v2 memory.max or v1 memory.limit_in_bytes
	// ("cgroup_limit_bytes"); 0 means no limit.
	CgroupLimitBytes uint64 `json:"cgroup_limit_bytes"`
	// CgroupUsageBytes is the memory charged to the process's own cgroup,
	// v2 memory.current or v1 memory.usage_in_bytes, page cache included
	// ("cgroup_usage_bytes"); 0 if unknown.
	CgroupUsageBytes uint64 `json:"cgroup_usage_bytes"`
}

// unlimitedV1 is the smallest value treated as "no limit" in cgroup v1:
// the kernel reports an unlimited memory.limit_in_bytes as
// PAGE_COUNTER_MAX * PAGE_SIZE, 9223372036854771712 with 4 KiB pages.
const unlimitedV1 = 1 << 62

func (r *reader) memory() Memory {
	var m Memory
	mi, err := r.read("proc/meminfo")
	if err != nil {
		if total := osMemTotal(r.real); total > 0 {
			// macOS: the total from sysctl; what is available, unknown.
			m.HostTotalBytes, m.TotalBytes = total, total
			r.warn("memory: available memory unknown on this system (no /proc/meminfo); total from sysctl hw.memsize")
			return m
		}
		r.warn("memory: %v", err)
	}
	fields := map[string]uint64{}
	for line := range strings.SplitSeq(mi, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields[k] = parseKB(strings.Fields(v))
	}
	m.HostTotalBytes = fields["MemTotal"]
	if v, ok := fields["MemAvailable"]; ok {
		m.HostAvailableBytes = v
	} else {
		m.HostAvailableBytes = fields["MemFree"] + fields["Buffers"] + fields["Cached"]
	}
	m.TotalBytes, m.AvailableBytes = m.HostTotalBytes, m.HostAvailableBytes

	cg := r.cgroupMemory()
	m.CgroupVersion = cg.version
	m.CgroupUsageBytes = cg.usage
	if cg.limit > 0 {
		m.CgroupLimitBytes = cg.limit
		if m.TotalBytes == 0 || cg.limit < m.TotalBytes {
			m.TotalBytes = cg.limit
		}
		if m.HostTotalBytes == 0 || cg.headroom < m.AvailableBytes {
			m.AvailableBytes = cg.headroom
		}
	}
	return m
}

// cgroupMem is what the memory controller says about this process.
type cgroupMem struct {
	version  int
	limit    uint64 // smallest limit on the path; 0 = none
	headroom uint64 // smallest limit-minus-working-set on the path
	// hasHeadroom reports whether headroom was set (it may be 0).
	hasHeadroom bool
	usage       uint64 // usage of the leaf cgroup
}

// cgroupMemory finds the process's cgroup in /proc/self/cgroup and walks
// from it up to the hierarchy root under /sys/fs/cgroup, reading the
// memory limit and usage at each level. The hierarchy is expected where
// systemd and container runtimes mount it: /sys/fs/cgroup for v2 (or
// /sys/fs/cgroup/unified in hybrid mode) and /sys/fs/cgroup/memory for v1.
// Inside a container the cgroup path may name a directory that does not
// exist in the container's view (no cgroup namespace); walking up then
// reaches the mount root, which is the container's own cgroup.
func (r *reader) cgroupMemory() cgroupMem {
	var res cgroupMem
	data, err := fs.ReadFile(r.fsys, "proc/self/cgroup")
	if err != nil {
		return res
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// Lines are "hierarchy-ID:controller-list:cgroup-path".
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		p := strings.Trim(f[2], "/")
		if f[0] == "0" && f[1] == "" {
			for _, root := range []string{"sys/fs/cgroup", "sys/fs/cgroup/unified"} {
				r.walkMemory(&res, 2, root, p)
			}
			continue
		}
		for c := range strings.SplitSeq(f[1], ",") {
			if c == "memory" {
				r.walkMemory(&res, 1, "sys/fs/cgroup/memory", p)
			}
		}
	}
	return res
}

// walkMemory visits root/p and its ancestors up to root. The first level
// with a usage file is the process's own cgroup.
func (r *reader) walkMemory(res *cgroupMem, version int, root, p string) {
	for {
		dir := path.Join(root, p)
		limit, usage, inactive, ok := r.memoryLevel(version, dir)
		if ok {
			if res.version == 0 {
				res.version = version
			}
			if res.usage == 0 && usage > 0 {
				res.usage = usage
			}
			if limit > 0 {
				if res.limit == 0 || limit < res.limit {
					res.limit = limit
				}
				// Usage minus reclaimable page cache is the working set.
				ws := usage - min(inactive, usage)
				head := limit - min(ws, limit)
				if !res.hasHeadroom || head < res.headroom {
					res.headroom, res.hasHeadroom = head, true
				}
			}
		}
		if p == "" {
			return
		}
		p = path.Dir(p)
		if p == "." || p == "/" {
			p = ""
		}
	}
}

// memoryLevel reads one cgroup directory. ok reports whether the directory
// holds memory controller files at all; limit is 0 when unlimited.
func (r *reader) memoryLevel(version int, dir string) (limit, usage, inactive uint64, ok bool) {
	limitFile, usageFile, inactiveKey := "memory.max", "memory.current", "inactive_file"
	if version == 1 {
		limitFile, usageFile, inactiveKey = "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"
	}
	ls, lerr := r.read(path.Join(dir, limitFile))
	us, uerr := r.read(path.Join(dir, usageFile))
	if lerr != nil && uerr != nil {
		return 0, 0, 0, false
	}
	if lerr == nil && ls != "max" {
		if v, err := strconv.ParseUint(ls, 10, 64); err == nil && v < unlimitedV1 {
			limit = v
		}
	}
	if uerr == nil {
		usage, _ = strconv.ParseUint(us, 10, 64)
	}
	if st, err := r.read(path.Join(dir, "memory.stat")); err == nil {
		for line := range strings.SplitSeq(st, "\n") {
			k, v, _ := strings.Cut(line, " ")
			if k == inactiveKey {
				inactive, _ = strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			}
		}
	}
	return limit, usage, inactive, true
}
