package nvml_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/pzgo/pz/hardware/nvml"
	"github.com/pzgo/pz/internal/fakenvml"
)

// Reading a GPU's free memory without a CUDA context. A program calls
// nvml.Open(); this example loads the stand-in NVML that the tests
// compile (it needs a C compiler), with one 80 GiB GPU of which 60 GiB
// are free.
func Example() {
	lib, err := fakenvml.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	const uuid = "GPU-6c2d2a6b-1c3e-4b8f-9a0d-5e7f1b2c3d4e"
	os.Setenv(fakenvml.EnvDevices, uuid+",0000:01:00.0,85899345920,64424509440")
	defer os.Unsetenv(fakenvml.EnvDevices)

	l, err := nvml.OpenLibrary(lib)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	dev, err := l.DeviceByUUID(uuid) // as cuda.DeviceInfo.UUID spells it
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := dev.MemoryInfo()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("by UUID: %d GiB total, %d GiB free, %d GiB used\n", m.TotalBytes>>30, m.FreeBytes>>30, m.UsedBytes>>30)

	dev, err = l.DeviceByPCIBusID("00000000:01:00.0") // nvidia-smi's form of 0000:01:00.0
	if err != nil {
		fmt.Println(err)
		return
	}
	m, _ = dev.MemoryInfo()
	fmt.Printf("by PCI bus id: %d GiB free\n", m.FreeBytes>>30)

	_, err = l.DeviceByUUID("GPU-00000000-0000-0000-0000-000000000000")
	fmt.Println("unknown:", errors.Is(err, nvml.ErrNotFound))
	fmt.Println(err)
	// Output:
	// by UUID: 80 GiB total, 60 GiB free, 20 GiB used
	// by PCI bus id: 60 GiB free
	// unknown: true
	// nvml: nvmlDeviceGetHandleByUUID(GPU-00000000-0000-0000-0000-000000000000): NVML_ERROR_NOT_FOUND (6): Not Found
}
