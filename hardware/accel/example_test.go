package accel_test

import (
	"encoding/binary"
	"fmt"

	"github.com/pzgo/pz/hardware/accel"
)

// Move data to a simulated device and back, computing on it in between
// through its host view.
func ExampleNewSim() {
	d, err := accel.NewSim(0, accel.SimConfig{Memory: 64 << 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	host := make([]byte, 32)
	for i := range 4 {
		binary.LittleEndian.PutUint64(host[8*i:], uint64(i+1))
	}
	m, _ := d.Alloc(len(host))
	if err := accel.Wait(func(done accel.Done) { d.CopyIn(m, 0, host, 1, len(host), len(host), done) }); err != nil {
		fmt.Println(err)
		return
	}
	dev := d.Host(m) // the device's copy: doubling it leaves host alone
	for i := range 4 {
		binary.LittleEndian.PutUint64(dev[8*i:], 2*binary.LittleEndian.Uint64(dev[8*i:]))
	}
	fmt.Println("host before:", binary.LittleEndian.Uint64(host[24:]))
	if err := accel.Wait(func(done accel.Done) { d.CopyOut(host, 1, len(host), len(host), m, 0, done) }); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("host after:", binary.LittleEndian.Uint64(host[24:]), "in use:", d.InUse())
	// Output:
	// host before: 4
	// host after: 8 in use: 32
}
