package tiled

import (
	"context"
	"errors"
	"fmt"
	"github.com/pzgo/pz/internal/plural"
	"math"
	"time"

	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// ErrBadOptions is returned (wrapped, naming the option and the fix) for
// invalid app options.
var ErrBadOptions = errors.New("apps: invalid options")

// CheckShape validates a matrix order n cut into b×b tiles and a
// precision of 32 or 64 bits.
func CheckShape(n, b, precision int) error {
	switch {
	case n <= 0:
		return fmt.Errorf("%w: matrix size %d (-n) must be positive", ErrBadOptions, n)
	case b <= 0 || b > n:
		return fmt.Errorf("%w: block size %d (-b) must be in 1..%d, the matrix size (-n)", ErrBadOptions, b, n)
	case n%b != 0:
		return fmt.Errorf("%w: matrix size %d is not a multiple of block size %d (try -n %d)", ErrBadOptions, n, b, n/b*b+b)
	case precision != 32 && precision != 64:
		return fmt.Errorf("%w: precision %d (-precision) must be 32 or 64", ErrBadOptions, precision)
	}
	return nil
}

// MatrixBytes returns the size in bytes of an n×n matrix of precision-bit
// values, in float64: for an absurd n it does not overflow.
func MatrixBytes(n, precision int) float64 {
	return float64(n) * float64(n) * float64(precision/8)
}

// maxAlloc bounds what one Go process can allocate: the heap's addresses
// span 48 bits on linux/amd64 and arm64.
const maxAlloc = 1 << 48

// CheckMemory returns an error wrapping ErrBadOptions, naming the size
// and what it is made of (what, e.g. "3 matrices of 10000×10000 fp32
// values"), when a run that holds need bytes at once cannot fit in the
// available bytes of memory, or cannot be allocated at all (available 0:
// unknown). A run checks it before it allocates, rather than fail in
// makeslice or be killed by the kernel's OOM killer.
func CheckMemory(need float64, what string, available uint64) error {
	switch {
	case available > 0 && need > float64(available):
		return fmt.Errorf("%w: the run needs at least %s of memory (%s), more than the %s available here: choose a smaller matrix", ErrBadOptions, FormatBytes(need), what, FormatBytes(float64(available)))
	case need >= maxAlloc:
		return fmt.Errorf("%w: the run needs at least %s of memory (%s), more than a process can address", ErrBadOptions, FormatBytes(need), what)
	}
	return nil
}

// AvailableMemory returns the memory available to this process (the
// host's, lowered to its cgroup's headroom; hardware.Memory), or 0 when it
// cannot be read. It costs about a millisecond of file reads.
func AvailableMemory(ctx context.Context) uint64 {
	m, err := hardware.Discover(ctx, hardware.WithoutGPUs())
	if err != nil {
		return 0
	}
	return m.Memory.AvailableBytes
}

// OnRanks runs run on n in-process ranks (CPU workers only: no GPU is
// opened) and returns rank 0's result: how a test runs a distributed app.
func OnRanks[R any](ctx context.Context, n int, run func(context.Context, *runtimeview.RuntimeView) (*R, error)) (*R, error) {
	var res *R
	err := runtimeview.RunLocal(ctx, n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		r, err := run(ctx, rt)
		if err == nil && rt.Rank() == 0 {
			res = r
		}
		return err
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()))
	return res, err
}

// RanksHere returns how many of rt's ranks run on this rank's host,
// whose memory they share (in-process ranks all do), and whether rank 0
// is one of them.
func RanksHere(rt *runtimeview.RuntimeView) (n int, root bool) {
	if rt.Backend() == runtimeview.Local {
		// Without building every rank's resource set on every rank: n²
		// of them between in-process ranks (23 GB at 4,096 ranks when
		// each held its own logger).
		return rt.Size(), true
	}
	host := rt.MyResourceSet().Host().Hostname
	for r := range rt.Size() {
		if rt.ResourceSet(r).Host().Hostname == host {
			n++
			root = root || r == 0
		}
	}
	return max(n, 1), root || rt.Rank() == 0
}

// FormatBytes writes a size with a binary unit: 1.5 GiB.
func FormatBytes(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}

// TimeKernel returns the shortest duration of run over at least minReps
// calls and at least minTotal of accumulated run time, calling prep
// (untimed, may be nil) before each. The minimum is the kernel's speed
// on a core nobody else is using: on a shared machine, load during the
// timing cannot make a parallel efficiency computed from it look better.
//
// A long kernel is not repeated past MaxKernelTiming of accumulated run
// time (a large tile's GEMM takes seconds, where one call is timed well
// enough: five of an 8192 tile's kernels took minutes before the run).
// TimeKernel checks ctx before each call and returns its cause once it
// is done (a Ctrl-C during the timing ends it at the next call).
func TimeKernel(ctx context.Context, minReps int, minTotal time.Duration, prep, run func()) (time.Duration, error) {
	best := time.Duration(math.MaxInt64)
	var total time.Duration
	for n := 0; n < minReps || total < minTotal; n++ {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("timing the tile kernels: %w", context.Cause(ctx))
		}
		if prep != nil {
			prep()
		}
		t0 := time.Now()
		run()
		d := time.Since(t0)
		best = min(best, d)
		total += d
		if n >= 100000 || total >= MaxKernelTiming { // a kernel of a few ns: enough samples; a long one: enough time
			break
		}
	}
	return best, nil
}

// MaxKernelTiming is the run time after which TimeKernel stops repeating
// a kernel, whatever its minimum count of calls.
var MaxKernelTiming = time.Second

// GFlops returns flops per second in units of 10⁹.
func GFlops(flops float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return flops / d.Seconds() / 1e9
}

// Prepare fills a run's zero precision (32) and seed (1) and checks its
// shape and counts: what every tiled app's Run does first.
func Prepare(n, b int, precision *int, seed *uint64, workers, warmup int) error {
	if *precision == 0 {
		*precision = 32
	}
	if *seed == 0 {
		*seed = 1
	}
	if err := CheckShape(n, b, *precision); err != nil {
		return err
	}
	if workers < 0 {
		return fmt.Errorf("%w: workers %d (-workers) must not be negative (0: one per core)", ErrBadOptions, workers)
	}
	if warmup < 0 {
		return fmt.Errorf("%w: warmup %d (-warmup) must not be negative", ErrBadOptions, warmup)
	}
	return nil
}

// PrepareGrid fills a distributed run's P x Q process grid over ranks
// ranks when both are zero (the most square, dist.Grid) and checks it:
// what every tiled app's RunDist does after Prepare.
func PrepareGrid(ranks int, p, q *int) error {
	if *p == 0 && *q == 0 {
		*p, *q = dist.Grid(ranks)
	}
	if err := dist.BlockCyclic2D(*p, *q).Check(ranks); err != nil {
		return fmt.Errorf("%w: %w (-grid PxQ, or leave it out for the most square grid)", ErrBadOptions, err)
	}
	return nil
}

// SchedulerOptions are the options of a run's scheduler: the policy and
// the worker count when set, then extra.
func SchedulerOptions(policy string, workers int, extra []scheduler.Option) []scheduler.Option {
	var out []scheduler.Option
	if policy != "" {
		out = append(out, scheduler.WithPolicy(policy))
	}
	if workers > 0 {
		out = append(out, scheduler.WithWorkers(workers))
	}
	return append(out, extra...)
}

// Devices are a run's figures on the scheduler's devices (simulated
// accelerators, WithSimDevices), printed by the apps' JSON as:
//
//	devices        device workers (0: CPU workers only)
//	device_tasks   tile tasks the devices ran
//	device_bytes   bytes copied between RAM and the devices
//	evictions      device replicas dropped to make room
//	write_backs    of those, replicas written back to RAM first (the
//	               only valid copy): out-of-core traffic
//	pinned         the matrices were page-locked for the GPUs (Pin), so
//	               their copies ran asynchronously (absent: pageable)
//
// On several ranks each figure is the sum over the ranks.
type Devices struct {
	Devices     int   `json:"devices"`
	DeviceTasks int64 `json:"device_tasks"`
	DeviceBytes int64 `json:"device_bytes"`
	Evictions   int64 `json:"evictions"`
	WriteBacks  int64 `json:"write_backs"`
	Pinned      bool  `json:"pinned,omitempty"`
}

// DeviceFigures returns s's device figures so far; subtract two of them
// (Sub) for one run's.
func DeviceFigures(s *scheduler.Scheduler) Devices {
	var d Devices
	for _, st := range s.Stats() {
		if st.Kind != scheduler.CPUWorker {
			d.Devices++
			d.DeviceTasks += st.Tasks
		}
	}
	for _, x := range s.Transfers() {
		d.DeviceBytes += x.Bytes
		d.Evictions += x.Evictions
		d.WriteBacks += x.WriteBacks
	}
	return d
}

// DeviceWorkers returns the number of device workers (the JSON's
// devices).
func (d Devices) DeviceWorkers() int { return d.Devices }

// Sub returns the figures of what happened between base and d.
func (d Devices) Sub(base Devices) Devices {
	return Devices{Devices: d.Devices, DeviceTasks: d.DeviceTasks - base.DeviceTasks, DeviceBytes: d.DeviceBytes - base.DeviceBytes,
		Evictions: d.Evictions - base.Evictions, WriteBacks: d.WriteBacks - base.WriteBacks, Pinned: d.Pinned}
}

// String is a short human-readable form; "" without devices.
func (d Devices) String() string {
	if d.Devices == 0 {
		return ""
	}
	pinned := ""
	if d.Pinned {
		pinned = " from pinned memory"
	}
	return fmt.Sprintf(", %s ran %s, %.1f MiB copied%s, %s (%d written back)",
		plural.Of(d.Devices, "device"), plural.Of(int(d.DeviceTasks), "task"), float64(d.DeviceBytes)/(1<<20), pinned, plural.Of(int(d.Evictions), "eviction"), d.WriteBacks)
}
