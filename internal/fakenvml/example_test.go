package fakenvml_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pzgo/pz/hardware/nvml"
	"github.com/pzgo/pz/internal/fakenvml"
)

// privateCopy copies the stand-in at lib into dir: a file of its own is
// an instance of its own, with counters starting at zero (what Instance
// does for a test).
func privateCopy(lib, dir string) (string, error) {
	b, err := os.ReadFile(lib)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, fakenvml.LibraryName)
	return path, os.WriteFile(path, b, 0o755)
}

// The stand-in NVML under hardware/nvml, on a machine without a GPU:
// two GPUs described in the environment, found by UUID and by PCI bus id
// (in another of NVML's spellings), an unknown UUID refused as NVML
// refuses it, and the calls counted.
func Example() {
	lib, err := fakenvml.Compile() // a test calls fakenvml.Instance(t)
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, err := os.MkdirTemp("", "pz-fakenvml-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	if lib, err = privateCopy(lib, dir); err != nil {
		fmt.Println(err)
		return
	}

	devs := []fakenvml.Device{
		{UUID: "GPU-11111111-0000-4000-8000-000000000000", PCIBusID: "0000:01:00.0", TotalBytes: 80 << 30, FreeBytes: 60 << 30},
		{UUID: "GPU-22222222-0000-4000-8000-000000000000", PCIBusID: "0000:41:00.0", TotalBytes: 80 << 30, FreeBytes: 79 << 30},
	}
	fmt.Println(fakenvml.EnvDevices + "=" + fakenvml.Format(devs...))
	os.Setenv(fakenvml.EnvDevices, fakenvml.Format(devs...)) // a test calls fakenvml.Setenv(t, devs...)
	defer os.Unsetenv(fakenvml.EnvDevices)

	l, err := nvml.OpenLibrary(lib)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, id := range []string{devs[0].UUID, "41:00.0"} {
		var d nvml.Device
		if id == devs[0].UUID {
			d, err = l.DeviceByUUID(id)
		} else {
			d, err = l.DeviceByPCIBusID(id)
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		m, err := d.MemoryInfo()
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %d GiB used of %d\n", id, m.UsedBytes>>30, m.TotalBytes>>30)
	}
	_, err = l.DeviceByUUID("GPU-33333333-0000-4000-8000-000000000000")
	fmt.Println("unknown UUID:", errors.Is(err, nvml.ErrNotFound))

	s, _ := fakenvml.Stats(lib)
	fmt.Printf("open: %d init, %d lookups, %d memory infos, %d initialized\n", s.Inits, s.Lookups, s.MemoryInfo, s.Refs)
	l.Close()
	s, _ = fakenvml.Stats(lib)
	fmt.Printf("closed: %d shutdown, %d initialized\n", s.Shutdowns, s.Refs)
	// Output:
	// PZ_FAKENVML_DEVICES=GPU-11111111-0000-4000-8000-000000000000,0000:01:00.0,85899345920,64424509440;GPU-22222222-0000-4000-8000-000000000000,0000:41:00.0,85899345920,84825604096
	// GPU-11111111-0000-4000-8000-000000000000: 20 GiB used of 80
	// 41:00.0: 1 GiB used of 80
	// unknown UUID: true
	// open: 1 init, 3 lookups, 2 memory infos, 1 initialized
	// closed: 1 shutdown, 0 initialized
}

// A driver that is not loaded: nvmlInit_v2 fails with the code that
// EnvInitError names, and hardware/nvml reports no usable NVML.
func Example_initError() {
	lib, err := fakenvml.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, err := os.MkdirTemp("", "pz-fakenvml-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	if lib, err = privateCopy(lib, dir); err != nil {
		fmt.Println(err)
		return
	}
	os.Setenv(fakenvml.EnvInitError, "9") // NVML_ERROR_DRIVER_NOT_LOADED
	defer os.Unsetenv(fakenvml.EnvInitError)

	_, err = nvml.OpenLibrary(lib)
	fmt.Println("no library:", errors.Is(err, nvml.ErrNoLibrary))
	fmt.Println("driver not loaded:", errors.Is(err, nvml.ErrDriverNotLoaded))
	s, _ := fakenvml.Stats(lib)
	fmt.Printf("%d init tried, %d initialized\n", s.Inits, s.Refs)
	// Output:
	// no library: true
	// driver not loaded: true
	// 1 init tried, 0 initialized
}
