package hardware_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/pzgo/pz/hardware"
)

// Discover describes the machine the program runs on. What it finds
// varies, so this prints what must agree with the Go runtime's view: the
// CPUs the process may run on are the ones runtime.NumCPU counts.
func ExampleDiscover() {
	m, err := hardware.Discover(context.Background(), hardware.WithoutGPUs())
	if err != nil {
		fmt.Println("discover:", err)
		return
	}
	c := m.CPU
	fmt.Println("allowed CPUs as runtime.NumCPU counts them:", len(c.AllowedCPUs) == runtime.NumCPU())
	fmt.Println("some cores, no more physical than logical:", c.PhysicalCores > 0 && c.LogicalCores >= c.PhysicalCores)
	fmt.Println("some RAM, within the host's:", m.Memory.TotalBytes > 0 && m.Memory.TotalBytes <= m.Memory.HostTotalBytes)
	// Output:
	// allowed CPUs as runtime.NumCPU counts them: true
	// some cores, no more physical than logical: true
	// some RAM, within the host's: true
}

// WithRoot reads a /proc and /sys tree of another machine: here a
// made-up one of one socket, two cores of two hardware threads each and
// 16 GiB, whose process may run on CPUs 1 and 3 only.
func ExampleWithRoot() {
	root, err := os.MkdirTemp("", "pz-hardware-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(root)
	var cpuinfo strings.Builder
	for cpu := range 4 {
		fmt.Fprintf(&cpuinfo, "processor\t: %d\nvendor_id\t: GenuineIntel\nmodel name\t: Example CPU\nphysical id\t: 0\ncore id\t\t: %d\n\n", cpu, cpu%2)
	}
	files := map[string]string{
		"proc/cpuinfo":     cpuinfo.String(),
		"proc/meminfo":     "MemTotal:       16777216 kB\nMemFree:         8388608 kB\nMemAvailable:   12582912 kB\n",
		"proc/self/status": "Name:\tpz\nCpus_allowed_list:\t1,3\n",
	}
	for name, text := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			fmt.Println(err)
			return
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			fmt.Println(err)
			return
		}
	}
	m, err := hardware.Discover(context.Background(), hardware.WithRoot(root), hardware.WithoutGPUs())
	if err != nil {
		fmt.Println(err)
		return
	}
	c := m.CPU
	fmt.Printf("%s: %d logical, %d physical cores, %d socket\n", c.Model, c.LogicalCores, c.PhysicalCores, c.Sockets)
	fmt.Println("allowed:", hardware.FormatCPUList(c.AllowedCPUs), "usable:", c.Usable())
	fmt.Printf("RAM: %d GiB, %d GiB available\n", m.Memory.TotalBytes>>30, m.Memory.AvailableBytes>>30)
	// Output:
	// Example CPU: 4 logical, 2 physical cores, 1 socket
	// allowed: 1,3 usable: 2
	// RAM: 16 GiB, 12 GiB available
}

func ExampleParseCPUList() {
	cpus, err := hardware.ParseCPUList("0-3,8,10-11")
	fmt.Println(cpus, err)
	fmt.Println(hardware.FormatCPUList(cpus))
	// Output:
	// [0 1 2 3 8 10 11] <nil>
	// 0-3,8,10-11
}
