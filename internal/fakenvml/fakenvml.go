// Package fakenvml is a stand-in NVML for tests: a small C library
// (csrc/fakenvml.c) that exports the entry points hardware/nvml binds,
// with the prototypes, struct layout and return codes of nvml.h, so that
// the binding and the discovery built on it run for real on machines
// without a GPU. It is never for production use.
//
// Build compiles the library with the system's C compiler (cc, or $CC)
// and returns its path, for nvml.OpenLibrary. Each load of a library file
// is one instance with its own state: Instance gives a test a private
// copy. The devices come from the environment (EnvDevices), read by each
// nvmlInit_v2 that finds the library uninitialized:
//
//	lib := fakenvml.Instance(t)
//	fakenvml.Setenv(t, fakenvml.Device{UUID: "GPU-...", PCIBusID: "0000:01:00.0", TotalBytes: 1 << 30, FreeBytes: 1 << 29})
//	l, err := nvml.OpenLibrary(lib)
//
// The stand-in behaves like NVML where a caller can go wrong: calls
// before nvmlInit_v2 (or after the last nvmlShutdown) fail with
// NVML_ERROR_UNINITIALIZED, NULL pointers and malformed PCI bus ids with
// NVML_ERROR_INVALID_ARGUMENT, and a UUID or bus id that names no device
// with NVML_ERROR_NOT_FOUND. PCI bus ids are compared as numbers, in the
// forms NVML accepts ("0000:01:00.0", "00000000:01:00.0", "01:00.0").
// nvmlErrorString gives NVML's texts ("Not Found", ...). Stats reads its
// call counters.
package fakenvml

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/pzgo/pz/internal/cbuild"
)

//go:embed csrc/fakenvml.c
var source []byte

// The environment variables the library reads at nvmlInit_v2.
const (
	// EnvDevices lists the devices, "UUID,BUSID,TOTAL,FREE" each (bytes,
	// decimal; FREE <= TOTAL), separated by ';'. Unset or empty: none.
	// A malformed value makes nvmlInit_v2 fail with NVML_ERROR_UNKNOWN.
	EnvDevices = "PZ_FAKENVML_DEVICES"
	// EnvInitError, when set, is an nvmlReturn_t that nvmlInit_v2
	// returns instead of initializing, e.g. 9
	// (NVML_ERROR_DRIVER_NOT_LOADED) or 4 (NVML_ERROR_NO_PERMISSION).
	EnvInitError = "PZ_FAKENVML_INIT_ERROR"
)

// LibraryName is the file name Build gives the library.
const LibraryName = "libnvidia-ml.so.1"

// library is the stand-in as internal/cbuild compiles it.
var library = cbuild.Library{
	Name: LibraryName, What: "the stand-in NVML", Cache: "pz-fakenvml", Source: source,
	Flags: []string{"-std=gnu11", "-O2", "-fPIC", "-shared", "-pthread", "-Wall", "-Wextra"},
}

// A Device is one GPU of the stand-in.
type Device struct {
	// UUID is what nvmlDeviceGetHandleByUUID matches, exactly, e.g.
	// "GPU-707a6661-6b65-4000-8000-000000000000".
	UUID string
	// PCIBusID is its PCI location, e.g. "0000:01:00.0".
	PCIBusID string
	// TotalBytes and FreeBytes are what nvmlDeviceGetMemoryInfo reports
	// (used is their difference).
	TotalBytes, FreeBytes uint64
}

// Format returns the EnvDevices value that describes devs.
func Format(devs ...Device) string {
	parts := make([]string, len(devs))
	for i, d := range devs {
		parts[i] = fmt.Sprintf("%s,%s,%d,%d", d.UUID, d.PCIBusID, d.TotalBytes, d.FreeBytes)
	}
	return strings.Join(parts, ";")
}

// Setenv makes the instances that the test initializes next (their
// nvmlInit_v2 reads the environment) have devs. Like tb.Setenv, it
// restores the environment when the test ends and cannot be used in
// parallel tests.
func Setenv(tb testing.TB, devs ...Device) {
	tb.Helper()
	tb.Setenv(EnvDevices, Format(devs...))
}

// Build compiles the stand-in, once per source and compiler for all the
// test binaries of this user (the library is cached under os.TempDir,
// written atomically), and returns the library's path. It skips the test
// when there is no C compiler and fails it when the compilation fails.
//
// All loads of this path share one instance; use Instance for a fresh
// one.
func Build(tb testing.TB) string {
	tb.Helper()
	return buildOrSkip(tb, nil)
}

// BuildWithout is Build for a library that lacks the entry points named
// (each an NVML function name, "nvml..."), for tests of a library too old
// or too broken to use. The functions are renamed at compile time, so
// everything else is as in Build.
func BuildWithout(tb testing.TB, symbols ...string) string {
	tb.Helper()
	var defs []string
	for _, s := range symbols {
		if !nvmlName.MatchString(s) {
			tb.Fatalf("fakenvml: %q is not an NVML function name", s)
		}
		defs = append(defs, "-D"+s+"=pzfakenvml_hidden_"+s)
	}
	return buildOrSkip(tb, defs)
}

var nvmlName = regexp.MustCompile(`^nvml[A-Za-z0-9_]+$`)

// Compile is Build for code without a testing.TB, such as an Example: it
// returns an error wrapping ErrNoCompiler where Build would skip.
func Compile() (string, error) {
	cc, err := cbuild.Compiler()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoCompiler, err)
	}
	return library.Build(cc, nil)
}

// ErrNoCompiler is returned by Compile when there is no C compiler.
var ErrNoCompiler = errors.New("fakenvml: no C compiler to build the stand-in NVML (install cc or set CC)")

func buildOrSkip(tb testing.TB, defs []string) string {
	tb.Helper()
	cc, err := cbuild.Compiler()
	if err != nil {
		tb.Skipf("%v: %v", ErrNoCompiler, err)
	}
	path, err := library.Build(cc, defs)
	if err != nil {
		tb.Fatalf("fakenvml: %v", err)
	}
	return path
}

// Instance returns the path of a private copy of the library in
// tb.TempDir(). The dynamic loader loads each file once, so the copy is
// an instance of its own: fresh state, counters starting at zero.
func Instance(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile(Build(tb))
	if err != nil {
		tb.Fatalf("fakenvml: %v", err)
	}
	path := filepath.Join(tb.TempDir(), LibraryName)
	if err := os.WriteFile(path, b, 0o755); err != nil {
		tb.Fatalf("fakenvml: %v", err)
	}
	return path
}

// Counters are an instance's statistics, in the order pzfakenvml_stats
// fills them.
type Counters struct {
	// Inits and Shutdowns count the nvmlInit_v2 and nvmlShutdown calls
	// (failed ones included).
	Inits, Shutdowns uint64
	// Lookups counts the handle lookups, by UUID or PCI bus id.
	Lookups uint64
	// MemoryInfo counts the nvmlDeviceGetMemoryInfo calls.
	MemoryInfo uint64
	// Refs is the initialization count now: successful nvmlInit_v2
	// calls not yet matched by nvmlShutdown.
	Refs uint64
}

// Stats reads the counters of the instance loaded from lib (loading it if
// nobody has), through the library's extra export
//
//	int pzfakenvml_stats(unsigned long long *out, int n)
//
// which copies up to n counters into out, in the order of Counters'
// fields, and returns how many it keeps.
func Stats(lib string) (Counters, error) {
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return Counters{}, fmt.Errorf("fakenvml: %w", err)
	}
	defer func() { _ = purego.Dlclose(h) }()
	sym, err := purego.Dlsym(h, "pzfakenvml_stats")
	if err != nil {
		return Counters{}, fmt.Errorf("fakenvml: %s is not the stand-in NVML: %w", lib, err)
	}
	var stats func(out *uint64, n int32) int32
	purego.RegisterFunc(&stats, sym)
	const n = 5
	var out [n]uint64
	if got := stats(&out[0], n); got < n {
		return Counters{}, fmt.Errorf("fakenvml: %s keeps %d counters, want %d", lib, got, n)
	}
	return Counters{Inits: out[0], Shutdowns: out[1], Lookups: out[2], MemoryInfo: out[3], Refs: out[4]}, nil
}
