package hardware

import (
	"bufio"
	"cmp"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/pzgo/pz/internal/procs"
)

// CPU describes the processors of the machine and the share this process
// may use. Counts are 0 when unknown.
type CPU struct {
	// Vendor is the CPU vendor string ("vendor"), e.g. "GenuineIntel" or
	// "AuthenticAMD" (vendor_id in /proc/cpuinfo); "" if unknown.
	Vendor string `json:"vendor"`
	// Model is the model name ("model"), e.g. "AMD EPYC 9654 96-Core
	// Processor" (model name in /proc/cpuinfo); "" if unknown.
	Model string `json:"model"`
	// LogicalCores counts the online logical CPUs, hardware threads
	// included ("logical_cores"), from /sys/devices/system/cpu/online; on
	// systems without sysfs and procfs (macOS), runtime.NumCPU.
	LogicalCores int `json:"logical_cores"`
	// PhysicalCores counts the distinct cores among the online CPUs
	// ("physical_cores"): CPUs sharing a core (SMT siblings, core_cpus_list)
	// count once.
	PhysicalCores int `json:"physical_cores"`
	// Sockets counts the distinct physical packages ("sockets").
	Sockets int `json:"sockets"`
	// NUMANodes lists the NUMA nodes ("numa_nodes") from
	// /sys/devices/system/node; empty when the kernel exposes none. Like
	// every list in a Machine from Discover it is empty, never nil, so the
	// JSON holds [] rather than null.
	NUMANodes []NUMANode `json:"numa_nodes"`
	// Caches lists the CPU caches ("caches"), one entry per level and type
	// (L1d, L1i, L2, L3), from /sys/devices/system/cpu/cpu*/cache; empty
	// when the kernel exposes none (common in virtual machines).
	Caches []Cache `json:"caches"`
	// AllowedCPUs lists the logical CPUs this process may run on, its
	// affinity mask ("allowed_cpus"), from Cpus_allowed_list in
	// /proc/self/status, less the CPUs that are not online (as
	// sched_getaffinity reports it); empty if unknown. On systems without
	// procfs (macOS), which have no affinity mask, every CPU.
	AllowedCPUs []int `json:"allowed_cpus"`
	// CgroupCPUQuota is the CPU time the process's cgroup may use, in cores
	// (quota/period, e.g. 1.5), the smallest over the cgroup and its
	// ancestors, cgroup v2 cpu.max or v1 cpu.cfs_quota_us
	// ("cgroup_cpu_quota"); 0 means no limit.
	CgroupCPUQuota float64 `json:"cgroup_cpu_quota"`
}

// Usable returns how many cores' worth of CPU time this process can use:
// the number of allowed CPUs (LogicalCores if the affinity is unknown),
// lowered to the cgroup quota when one is set. It is 0 only when nothing
// is known.
func (c CPU) Usable() float64 {
	n := float64(len(c.AllowedCPUs))
	if n == 0 {
		n = float64(c.LogicalCores)
	}
	if c.CgroupCPUQuota > 0 && (n == 0 || c.CgroupCPUQuota < n) {
		n = c.CgroupCPUQuota
	}
	return n
}

// A NUMANode is one memory node and the CPUs local to it.
type NUMANode struct {
	// ID is the node number ("id").
	ID int `json:"id"`
	// CPUs lists the logical CPUs of the node ("cpus"); empty for a
	// memory-only node.
	CPUs []int `json:"cpus"`
	// MemoryTotalBytes and MemoryFreeBytes are the node's memory
	// ("memory_total_bytes", "memory_free_bytes"), from the node's meminfo;
	// 0 if unknown.
	MemoryTotalBytes uint64 `json:"memory_total_bytes"`
	MemoryFreeBytes  uint64 `json:"memory_free_bytes"`
	// Distances holds the ACPI SLIT distance from this node to each node,
	// indexed by node position in the listing ("distances"); 10 means local.
	Distances []int `json:"distances"`
}

// A Cache is one level and type of CPU cache, e.g. the L2 of every core.
type Cache struct {
	// Name is "L1d", "L1i", "L2", "L3" or, for other caches, "L<level>"
	// followed by "d" or "i" for split caches ("name").
	Name string `json:"name"`
	// Level is the cache level, 1 for L1 ("level").
	Level int `json:"level"`
	// Type is "data", "instruction" or "unified" ("type").
	Type string `json:"type"`
	// SizeBytes is the size of one instance ("size_bytes").
	SizeBytes uint64 `json:"size_bytes"`
	// LineBytes is the coherency line size ("line_bytes"); 0 if unknown.
	LineBytes int `json:"line_bytes"`
	// Ways is the associativity ("ways"); 0 if unknown.
	Ways int `json:"ways"`
	// Instances lists, for each physical instance of this cache, the
	// logical CPUs that share it ("instances"), ordered by first CPU.
	Instances [][]int `json:"instances"`
}

// SharedBy returns how many logical CPUs share one instance of the cache
// (the largest instance, if they differ).
func (c Cache) SharedBy() int {
	n := 0
	for _, in := range c.Instances {
		n = max(n, len(in))
	}
	return n
}

// TotalBytes returns the capacity of all instances together.
func (c Cache) TotalBytes() uint64 {
	return c.SizeBytes * uint64(len(c.Instances))
}

func (r *reader) cpu() CPU {
	var c CPU
	info := r.cpuinfo()
	c.Vendor = info.vendor
	c.Model = info.model

	online, err := r.read("sys/devices/system/cpu/online")
	var cpus []int
	if err == nil {
		cpus, err = ParseCPUList(online)
	}
	fromOS := false
	if err != nil || len(cpus) == 0 {
		// Without sysfs, /proc/cpuinfo lists the online processors; with
		// neither (not Linux), the Go runtime's count (osCPUs).
		cpus = info.processors
		if len(cpus) == 0 {
			cpus = osCPUs(r.real)
			fromOS = len(cpus) > 0
		}
		if len(cpus) == 0 {
			r.warn("cpu: no online CPU list in /sys/devices/system/cpu/online or /proc/cpuinfo")
		}
	}
	c.LogicalCores = len(cpus)
	c.PhysicalCores, c.Sockets = r.topology(cpus, info)
	c.NUMANodes = r.numaNodes()
	c.Caches = r.caches(cpus)
	allowed := r.allowedCPUs()
	if allowed == nil && fromOS {
		// No affinity mask on such a system: every CPU is allowed.
		allowed = cpus
	}
	c.AllowedCPUs = onlineOnly(allowed, cpus)
	if q, ok := procs.CgroupCPUQuotaFS(r.fsys); ok && !math.IsInf(q, 0) && q > 0 {
		c.CgroupCPUQuota = q
	}
	// Empty rather than nil lists, so that JSON always holds arrays.
	c.NUMANodes = nonNil(c.NUMANodes)
	c.Caches = nonNil(c.Caches)
	c.AllowedCPUs = nonNil(c.AllowedCPUs)
	return c
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// cpuinfoData is what /proc/cpuinfo adds to sysfs.
type cpuinfoData struct {
	vendor, model string
	processors    []int
	// cores holds "physical id/core id" per processor, sockets the
	// physical ids; both empty where cpuinfo lacks them (arm64).
	cores, sockets map[string]bool
}

func (r *reader) cpuinfo() cpuinfoData {
	d := cpuinfoData{cores: map[string]bool{}, sockets: map[string]bool{}}
	f, err := r.fsys.Open("proc/cpuinfo")
	if err != nil {
		return d
	}
	defer f.Close()
	var physID, coreID string
	flush := func() {
		if physID != "" {
			d.sockets[physID] = true
			if coreID != "" {
				d.cores[physID+"/"+coreID] = true
			}
		}
		physID, coreID = "", ""
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20) // flags lines are long
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "processor":
			flush()
			if n, err := strconv.Atoi(v); err == nil {
				d.processors = append(d.processors, n)
			}
		case "vendor_id":
			if d.vendor == "" {
				d.vendor = v
			}
		case "model name", "Model", "cpu model":
			if d.model == "" {
				d.model = v
			}
		case "physical id":
			physID = v
		case "core id":
			coreID = v
		}
	}
	flush()
	return d
}

// topology counts physical cores and sockets among cpus. It prefers sysfs
// topology: distinct core_cpus_list (thread_siblings_list on older
// kernels) sets are cores, distinct physical_package_id values are sockets.
// Without it, it falls back to /proc/cpuinfo's physical id / core id.
func (r *reader) topology(cpus []int, info cpuinfoData) (cores, sockets int) {
	coreSets := map[string]bool{}
	packages := map[int]bool{}
	for _, cpu := range cpus {
		dir := fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology", cpu)
		set, err := r.read(path.Join(dir, "core_cpus_list"))
		if err != nil {
			set, err = r.read(path.Join(dir, "thread_siblings_list"))
		}
		if err == nil {
			if list, err := ParseCPUList(set); err == nil && len(list) > 0 {
				coreSets[FormatCPUList(list)] = true
			}
		}
		// physical_package_id is -1 where firmware does not say.
		if p := r.readInt(path.Join(dir, "physical_package_id"), -1); p >= 0 {
			packages[p] = true
		}
	}
	cores, sockets = len(coreSets), len(packages)
	if cores == 0 {
		cores = len(info.cores)
	}
	if sockets == 0 {
		sockets = len(info.sockets)
	}
	if cores == 0 && len(cpus) > 0 {
		// Nothing says which CPUs share a core: assume none do.
		cores = len(cpus)
	}
	return cores, sockets
}

func (r *reader) numaNodes() []NUMANode {
	const base = "sys/devices/system/node"
	entries, err := fs.ReadDir(r.fsys, base)
	if err != nil {
		return nil
	}
	var nodes []NUMANode
	for _, e := range entries {
		idStr, ok := strings.CutPrefix(e.Name(), "node")
		if !ok {
			continue
		}
		id, err := strconv.Atoi(idStr)
		if err != nil {
			continue
		}
		dir := path.Join(base, e.Name())
		n := NUMANode{ID: id, CPUs: []int{}, Distances: []int{}}
		if s, err := r.read(path.Join(dir, "cpulist")); err == nil {
			if list, err := ParseCPUList(s); err == nil && list != nil {
				n.CPUs = list
			}
		}
		if s, err := r.read(path.Join(dir, "meminfo")); err == nil {
			// Lines look like "Node 0 MemTotal:       4548384 kB".
			for line := range strings.SplitSeq(s, "\n") {
				f := strings.Fields(line)
				if len(f) < 4 {
					continue
				}
				switch f[2] {
				case "MemTotal:":
					n.MemoryTotalBytes = parseKB(f[3:])
				case "MemFree:":
					n.MemoryFreeBytes = parseKB(f[3:])
				}
			}
		}
		if s, err := r.read(path.Join(dir, "distance")); err == nil {
			for _, f := range strings.Fields(s) {
				if v, err := strconv.Atoi(f); err == nil {
					n.Distances = append(n.Distances, v)
				}
			}
		}
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b NUMANode) int { return cmp.Compare(a.ID, b.ID) })
	return nodes
}

// parseKB parses ["123", "kB"] (or a bare number, taken as bytes) into
// bytes; 0 if malformed.
func parseKB(f []string) uint64 {
	if len(f) == 0 {
		return 0
	}
	v, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0
	}
	if len(f) > 1 && strings.EqualFold(f[1], "kB") {
		return v * 1024
	}
	return v
}

// caches groups the cache indexes of every online CPU by level and type and
// deduplicates instances by the CPUs that share them.
func (r *reader) caches(cpus []int) []Cache {
	type key struct {
		level int
		typ   string
	}
	byKey := map[key]*Cache{}
	seen := map[key]map[string]bool{}
	for _, cpu := range cpus {
		base := fmt.Sprintf("sys/devices/system/cpu/cpu%d/cache", cpu)
		entries, err := fs.ReadDir(r.fsys, base)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), "index") {
				continue
			}
			dir := path.Join(base, e.Name())
			level := r.readInt(path.Join(dir, "level"), 0)
			typ, _ := r.read(path.Join(dir, "type"))
			typ = strings.ToLower(typ)
			sizeStr, _ := r.read(path.Join(dir, "size"))
			size := parseSize(sizeStr)
			if level <= 0 || size == 0 {
				continue
			}
			shared := []int{cpu}
			if s, err := r.read(path.Join(dir, "shared_cpu_list")); err == nil {
				if list, err := ParseCPUList(s); err == nil && len(list) > 0 {
					shared = list
				}
			}
			k := key{level, typ}
			c := byKey[k]
			if c == nil {
				c = &Cache{
					Name:      cacheName(level, typ),
					Level:     level,
					Type:      typ,
					SizeBytes: size,
					LineBytes: r.readInt(path.Join(dir, "coherency_line_size"), 0),
					Ways:      r.readInt(path.Join(dir, "ways_of_associativity"), 0),
				}
				byKey[k] = c
				seen[k] = map[string]bool{}
			}
			id := FormatCPUList(shared)
			if !seen[k][id] {
				seen[k][id] = true
				c.Instances = append(c.Instances, shared)
			}
		}
	}
	typeOrder := map[string]int{"data": 0, "instruction": 1, "unified": 2}
	out := make([]Cache, 0, len(byKey))
	for _, c := range byKey {
		slices.SortFunc(c.Instances, func(a, b []int) int { return cmp.Compare(a[0], b[0]) })
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Cache) int {
		return cmp.Or(cmp.Compare(a.Level, b.Level), cmp.Compare(typeOrder[a.Type], typeOrder[b.Type]), cmp.Compare(a.Type, b.Type))
	})
	return out
}

func cacheName(level int, typ string) string {
	name := "L" + strconv.Itoa(level)
	switch typ {
	case "data":
		name += "d"
	case "instruction":
		name += "i"
	}
	return name
}

// parseSize parses sysfs cache sizes such as "48K", "2048K", "32M" or a
// bare byte count; 0 if malformed.
func parseSize(s string) uint64 {
	s = strings.TrimSpace(s)
	mult := uint64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0
	}
	return v * mult
}

// allowedCPUs reads the affinity mask of the process from
// /proc/self/status (reading the file keeps it testable with a fake root).
// The file shows the mask as set, offline CPUs included; cpu keeps the
// online ones (onlineOnly), as sched_getaffinity does.
func (r *reader) allowedCPUs() []int {
	s, err := r.read("proc/self/status")
	if err != nil {
		return nil
	}
	for line := range strings.SplitSeq(s, "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			list, err := ParseCPUList(v)
			if err != nil {
				r.warn("cpu: /proc/self/status: %v", err)
				return nil
			}
			return list
		}
	}
	return nil
}

// onlineOnly returns the CPUs of allowed that are in online. A process
// nobody bound keeps every possible CPU in its mask - offline ones and, in
// VMs with hot-pluggable CPUs, ones never online - and runs on none of
// them; sched_getaffinity, and so the Go runtime, leaves them out too.
// When online is unknown (empty), or the two lists have no CPU in common
// (a running process has one: the lists disagree), allowed is returned.
func onlineOnly(allowed, online []int) []int {
	if len(online) == 0 {
		return allowed
	}
	on := slices.Clone(online)
	slices.Sort(on)
	var out []int
	for _, c := range allowed {
		if _, found := slices.BinarySearch(on, c); found {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return allowed
	}
	return out
}
