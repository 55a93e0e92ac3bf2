package hardware

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/pzgo/pz/hardware/cuda"
)

// ErrBadRoot is returned by Discover when the root given with WithRoot is
// not a readable directory.
var ErrBadRoot = errors.New("hardware: bad root directory")

// A Machine is what Discover found on this host. It is plain data: safe to
// copy, to encode as JSON and to send to other ranks. The JSON field names
// of its encoding (encoding/json) are a stable interface. pzrun info
// --json prints a per-rank summary of its own instead, with the fields
// pzrun.md lists.
type Machine struct {
	// Host names the machine ("host").
	Host Host `json:"host"`
	// CPU describes the processors and what this process may use of them
	// ("cpu").
	CPU CPU `json:"cpu"`
	// Memory is the RAM this process can use ("memory").
	Memory Memory `json:"memory"`
	// GPUs lists the CUDA devices visible to this process, in CUDA ordinal
	// order ("gpus"). It is empty, never nil, when there is no driver or no
	// device, so the JSON always holds a list.
	GPUs []GPU `json:"gpus"`
	// Accelerators lists the devices the runtime computes with and keeps
	// data on besides the CPUs, as a rank opened them - simulated devices
	// today - in the order of the rank's device components
	// ("accelerators", omitted when empty). Discover leaves it empty; the
	// runtime fills it before the ranks exchange their descriptions.
	Accelerators []Accelerator `json:"accelerators,omitempty"`
	// Warnings lists parts of the discovery that failed in a way the caller
	// may want to know about, e.g. an unreadable /proc/meminfo or a CUDA
	// driver that is installed but does not initialize ("warnings", omitted
	// when empty). The matching fields hold their documented zero values.
	Warnings []string `json:"warnings,omitempty"`
}

// Host identifies the machine.
type Host struct {
	// Hostname is the kernel's host name ("hostname"), from
	// /proc/sys/kernel/hostname; "" if unknown.
	Hostname string `json:"hostname"`
	// Kernel is the kernel release ("kernel"), from
	// /proc/sys/kernel/osrelease; "" if unknown.
	Kernel string `json:"kernel"`
	// OS and Arch are the GOOS and GOARCH this binary was built for ("os",
	// "arch").
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// An Option configures Discover.
type Option func(*config)

type config struct {
	root       string
	gpus       bool
	driver     *cuda.Driver
	haveDriver bool
	nvmlPath   string // WithNVMLLibrary; "" for PZ_NVML_LIBRARY or the system's
	noNVML     bool   // WithoutNVML
	// contextFree reads a device's free memory through a CUDA context
	// (contextFreeMemory; tests replace it to make it fail).
	contextFree func(ctx context.Context, d *cuda.Driver, ordinal int) (uint64, error)
}

// WithRoot makes Discover read proc/ and sys/ under dir instead of the real
// /proc and /sys; tests point it at fake trees. GPUs still come from the
// CUDA driver: combine with WithoutGPUs for a fully synthetic machine.
func WithRoot(dir string) Option {
	return func(c *config) { c.root = dir }
}

// WithoutGPUs skips GPU discovery: Machine.GPUs is empty and the CUDA
// driver is not loaded.
func WithoutGPUs() Option {
	return func(c *config) { c.gpus = false }
}

// WithCUDADriver makes Discover query GPUs through d, an already opened
// driver, instead of opening one. A nil d means "no driver": zero GPUs.
func WithCUDADriver(d *cuda.Driver) Option {
	return func(c *config) { c.driver, c.haveDriver = d, true }
}

// WithNVMLLibrary makes Discover read the GPUs' free memory through the
// NVML library at path instead of the one the environment variable
// PZ_NVML_LIBRARY names or the system's libnvidia-ml.so.1; tests point it
// at a stand-in. A library that cannot be used is noted in
// Machine.Warnings, and free memory is then read through CUDA contexts.
// An empty path restores the default.
func WithNVMLLibrary(path string) Option {
	return func(c *config) { c.nvmlPath, c.noNVML = path, false }
}

// WithoutNVML makes Discover read the GPUs' free memory through a CUDA
// context on each device, as it does where NVML is missing.
func WithoutNVML() Option {
	return func(c *config) { c.noNVML = true }
}

// Discover reads what this machine has: host names, CPU topology, NUMA
// nodes, caches, the CPUs this process may run on and its cgroup CPU quota,
// memory honouring cgroup limits, and the GPUs the CUDA driver reports.
//
// Missing or malformed files are not errors: the affected fields keep the
// zero values their documentation gives, and unexpected failures are noted
// in Machine.Warnings. No CUDA driver means zero GPUs, not an error.
// Discover returns an error only when ctx is done or the root given with
// WithRoot is unusable.
//
// Cost: a few hundred small file reads; with GPUs, loading libcuda.so.1
// and libnvidia-ml.so.1 and one NVML lookup and memory query per device,
// which creates no CUDA context (see GPU). Only without NVML, or for a
// device NVML does not know, Discover retains the device's primary
// context once to read its free memory, which creates the context if
// nobody holds it (typically 0.1-0.5 s per device on first use in a
// process) and fails on a GPU in exclusive-process mode that another
// process holds.
func Discover(ctx context.Context, opts ...Option) (*Machine, error) {
	cfg := config{root: "/", gpus: true, contextFree: contextFreeMemory}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.root == "" {
		cfg.root = "/"
	}
	if st, err := os.Stat(cfg.root); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRoot, err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrBadRoot, cfg.root)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &reader{fsys: os.DirFS(cfg.root), real: filepath.Clean(cfg.root) == "/"}
	m := &Machine{GPUs: []GPU{}}
	m.Host = r.host()
	m.CPU = r.cpu()
	m.Memory = r.memory()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.gpus {
		gpus, err := discoverGPUs(ctx, cfg)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, ctxErr
			}
			r.warn("gpu: %v", err)
		}
		if gpus != nil {
			m.GPUs = gpus
		}
	}
	m.Warnings = r.warnings
	return m, nil
}

// reader reads one root tree and collects warnings. It is used by one
// goroutine for one Discover call.
type reader struct {
	fsys     fs.FS
	real     bool // the tree is the real root, so os-level fallbacks apply
	warnings []string
}

func (r *reader) warn(format string, args ...any) {
	r.warnings = append(r.warnings, fmt.Sprintf(format, args...))
}

// read returns the trimmed contents of name (a slash path relative to the
// root, e.g. "proc/meminfo").
func (r *reader) read(name string) (string, error) {
	b, err := fs.ReadFile(r.fsys, name)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// readInt returns the integer in name, or def when the file is missing or
// malformed.
func (r *reader) readInt(name string, def int) int {
	s, err := r.read(name)
	if err != nil {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	return v
}

func (r *reader) host() Host {
	h := Host{OS: runtime.GOOS, Arch: runtime.GOARCH}
	h.Hostname, _ = r.read("proc/sys/kernel/hostname")
	if h.Hostname == "" && r.real {
		h.Hostname, _ = os.Hostname()
	}
	h.Kernel, _ = r.read("proc/sys/kernel/osrelease")
	return h
}
