package hardware_test

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/hardware"
)

func ExampleDiscover() {
	m, err := hardware.Discover(context.Background())
	if err != nil {
		fmt.Println("discover:", err)
		return
	}
	c := m.CPU
	fmt.Println("logical >= physical cores:", c.LogicalCores >= c.PhysicalCores)
	fmt.Println("usable cores <= logical cores:", c.Usable() <= float64(c.LogicalCores))
	fmt.Println("effective RAM <= host RAM:", m.Memory.TotalBytes <= m.Memory.HostTotalBytes)
	// Output:
	// logical >= physical cores: true
	// usable cores <= logical cores: true
	// effective RAM <= host RAM: true
}

func ExampleParseCPUList() {
	cpus, err := hardware.ParseCPUList("0-3,8,10-11")
	fmt.Println(cpus, err)
	fmt.Println(hardware.FormatCPUList(cpus))
	// Output:
	// [0 1 2 3 8 10 11] <nil>
	// 0-3,8,10-11
}
