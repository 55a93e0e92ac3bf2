package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/pzgo/pz/internal/apps/benchtasks"
	"github.com/pzgo/pz/internal/apps/cholesky"
	"github.com/pzgo/pz/internal/apps/gemm"
	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/internal/peerdir"
	"github.com/pzgo/pz/internal/progress"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
	"golang.org/x/term"
)

// tiledFlags are the flags the tiled linear-algebra apps share.
type tiledFlags struct {
	n, b, precision, workers, warmup int
	policy, trace, grid              string
	check, json                      bool
	sims                             int    // simulated devices
	simMem, simBW                    string // their memory and bandwidth
	deviceOnly                       bool   // every tile task on the devices
	cuda                             int    // CUDA GPUs (-1: all)
	cudaRef                          bool   // time one library call on the whole matrix too
	pageable                         bool   // leave the matrices pageable with GPUs
	cudaMem                          string // cap on each GPU's data (WithCUDAMemoryLimit)
}

// cudaMemLimit checks -cuda-mem and returns its bytes (0 when not given).
func (f *tiledFlags) cudaMemLimit() (int64, error) {
	if f.cuda < -1 {
		return 0, fmt.Errorf("%w: -cuda %d: give a number of GPUs, or -1 for all of them", errUsage, f.cuda)
	}
	if f.cudaMem == "" {
		return 0, nil
	}
	if f.cuda == 0 && f.sims == 0 {
		return 0, fmt.Errorf("%w: -cuda-mem caps the devices' memory (GPUs, simulated devices): give -cuda N or -sim N too", errUsage)
	}
	m, err := scheduler.ParseBytes(f.cudaMem)
	if err != nil || m <= 0 {
		return 0, fmt.Errorf("%w: -cuda-mem %q: want a size such as 8GiB", errUsage, f.cudaMem)
	}
	return m, nil
}

// cudaOptions are the scheduler options of -cuda and -cuda-mem.
// The cap applies to simulated devices too (WithCUDAMemoryLimit caps
// every device).
func (f *tiledFlags) cudaOptions() []scheduler.Option {
	var opts []scheduler.Option
	if f.cuda != 0 {
		opts = append(opts, scheduler.WithCUDA(f.cuda))
	}
	if m, _ := f.cudaMemLimit(); m > 0 {
		opts = append(opts, scheduler.WithCUDAMemoryLimit(m))
	}
	return opts
}

// gridPQ parses -grid "PxQ"; "" gives 0, 0 (the most square grid).
func (f *tiledFlags) gridPQ() (p, q int, err error) {
	if f.grid == "" {
		return 0, 0, nil
	}
	if _, err := fmt.Sscanf(f.grid, "%dx%d", &p, &q); err != nil || p < 1 || q < 1 {
		return 0, 0, fmt.Errorf("%w: -grid %q: want PxQ with P, Q >= 1, e.g. 2x2", errUsage, f.grid)
	}
	return p, q, nil
}

func (f *tiledFlags) define(fs *flag.FlagSet, defN int) {
	fs.IntVar(&f.n, "n", defN, "matrix order `N` (a multiple of -b)")
	fs.IntVar(&f.b, "b", 256, "tile size `B`")
	fs.IntVar(&f.precision, "precision", 32, "32 (float32) or 64 (float64)")
	fs.IntVar(&f.workers, "workers", 0, "CPU workers (default: PZ_NCPU, else one per allowed core)")
	fs.IntVar(&f.warmup, "warmup", 0, "untimed runs first (calibrate dmda's models)")
	fs.StringVar(&f.policy, "policy", "", "scheduling policy: "+strings.Join(scheduler.Policies(), ", ")+" (default: PZ_SCHED, else lws)")
	fs.StringVar(&f.trace, "trace", "", "write a Chrome trace JSON to `FILE` and a Gantt SVG beside it (several ranks: merged, on rank 0)")
	fs.StringVar(&f.grid, "grid", "", "process grid `PxQ` of a run over several ranks (P*Q = ranks; default: the most square)")
	fs.BoolVar(&f.check, "check", false, "check the result")
	fs.BoolVar(&f.json, "json", false, "print the result as one JSON object")
	fs.IntVar(&f.sims, "sim", 0, "simulated accelerators `N` (each a memory node and a worker; on several ranks, N per rank; default: PZ_NSIM)")
	fs.StringVar(&f.simMem, "sim-mem", "", "memory of each simulated device, e.g. 64MiB (default: PZ_SIM_MEMORY, else 1GiB); smaller than the matrix runs out of core")
	fs.StringVar(&f.simBW, "sim-bw", "", "copy bandwidth of each simulated device in bytes/s, e.g. 16G, or mem for copies at memory speed (default 16G)")
	fs.BoolVar(&f.deviceOnly, "device-only", false, "run every tile task on the devices (cholesky), as a GPU-only run")
	fs.BoolVar(&f.cudaRef, "cuda-reference", false, "also time one cuSOLVER/cuBLAS call on the whole matrix on the first GPU (with -cuda): gpu_reference_gflops and gpu_reference_ratio")
	fs.BoolVar(&f.pageable, "pageable", false, "with -cuda, leave the matrices in pageable memory instead of page-locking them for the GPUs (to measure what pinning gives)")
	fs.StringVar(&f.cudaMem, "cuda-mem", "", "with -cuda, keep at most `SIZE` of data on each GPU, e.g. 8GiB (default: PZ_LIMIT_CUDA_MEM, else the GPU's memory); smaller than the matrix runs out of core")
	fs.IntVar(&f.cuda, "cuda", 0, "CUDA GPUs `N` to run tile kernels on through cuBLAS/cuSOLVER (on several ranks, N per rank; -1: all; default: PZ_NCUDA; none without a driver)")
}

// distSchedulerOptions are each rank's scheduler options in a
// distributed run: statistics for -trace, each rank its own devices.
func (f *tiledFlags) distSchedulerOptions() []scheduler.Option {
	opts := []scheduler.Option{scheduler.WithStats(f.trace != "")}
	if devs, _ := f.simDevices(); len(devs) > 0 {
		opts = append(opts, scheduler.WithSimDevices(devs...))
	}
	return append(opts, f.cudaOptions()...)
}

// simDevices checks the -sim flags and returns the devices they ask for.
func (f *tiledFlags) simDevices() ([]scheduler.SimDevice, error) {
	if f.sims < 0 {
		return nil, fmt.Errorf("%w: -sim %d: want a number of devices >= 0", errUsage, f.sims)
	}
	if f.sims == 0 {
		if f.simMem != "" || f.simBW != "" {
			return nil, fmt.Errorf("%w: -sim-mem and -sim-bw need -sim N", errUsage)
		}
		return nil, nil
	}
	var d scheduler.SimDevice
	if f.simMem != "" {
		m, err := scheduler.ParseBytes(f.simMem)
		if err != nil || m <= 0 {
			return nil, fmt.Errorf("%w: -sim-mem %q: want a size such as 64MiB", errUsage, f.simMem)
		}
		d.Memory = m
	}
	switch f.simBW {
	case "":
	case "mem":
		d.Bandwidth = -1 // accel.SimConfig: copies at memory speed
	default:
		bw, err := scheduler.ParseBytes(f.simBW)
		if err != nil || bw <= 0 {
			return nil, fmt.Errorf("%w: -sim-bw %q: want bytes per second such as 16G, or mem (copies at memory speed)", errUsage, f.simBW)
		}
		if bw < minSimBandwidth {
			// Calibrating the link copies tens of KiB: at 16 B/s, an
			// hour of silence.
			err := fmt.Errorf("%w: -sim-bw %s is %d bytes per second, below the least a run can use (1M)", errUsage, f.simBW, bw)
			if _, perr := strconv.ParseFloat(f.simBW, 64); perr == nil {
				err = fmt.Errorf("%w; a rate needs its unit: %sG is %s GB/s", err, f.simBW, f.simBW)
			}
			return nil, err
		}
		d.Bandwidth = float64(bw)
	}
	devs := make([]scheduler.SimDevice, f.sims)
	for i := range devs {
		devs[i] = d
	}
	return devs, nil
}

func (f *tiledFlags) schedulerOptions() []scheduler.Option {
	var opts []scheduler.Option
	if f.trace != "" {
		opts = append(opts, scheduler.WithTrace(f.trace))
	}
	if devs, _ := f.simDevices(); len(devs) > 0 {
		opts = append(opts, scheduler.WithSimDevices(devs...))
	}
	return append(opts, f.cudaOptions()...)
}

// writeDistTrace writes the merged trace of every rank's tasks and
// transfers on rank 0 (with -trace).
func writeDistTrace(ctx context.Context, rt *runtimeview.RuntimeView, path string) error {
	if path == "" {
		return nil
	}
	d, err := rt.Scheduler(ctx)
	if err != nil {
		return err
	}
	return d.WriteTraceFiles(ctx, path, 0)
}

// validPolicy turns an unknown policy into a usage error before anything runs.
func validPolicy(name string) error {
	if name == "" {
		return nil
	}
	for _, p := range scheduler.Policies() {
		if p == name {
			return nil
		}
	}
	return fmt.Errorf("%w: unknown policy %q; valid: %s", errUsage, name, strings.Join(scheduler.Policies(), ", "))
}

func printResult(e *env, asJSON bool, r fmt.Stringer) error {
	if asJSON {
		return writeJSON(e.stdout, r)
	}
	_, err := fmt.Fprintln(e.stdout, r)
	return err
}

// tiledRun runs one tiled app and returns its result, the error measure
// --check computed and the tolerance it must stay under.
// It runs on every rank when the app spans ranks (the result and the
// measure count on rank 0 only), else on rank 0 alone.
type tiledRun func(ctx context.Context, rt *runtimeview.RuntimeView, f *tiledFlags, progress io.Writer) (r fmt.Stringer, errMeasure, tol float64, err error)

// taskData returns the data of an app's tile tasks for flags f (a
// positive tile size and a valid precision): the least and the most one
// task touches at once, what a device must hold to run it, in bytes, and
// which task needs the most.
type taskData func(f *tiledFlags) (least, most float64, biggest string)

// checkDeviceMemory refuses a device memory of mem bytes (given says
// how: "-sim-mem 1MiB", "PZ_SIM_MEMORY=1MiB") that no tile task fits in, or that the biggest does not fit in
// under -device-only; otherwise a memory too small for the biggest task
// is a note on stderr: those tasks run on the CPUs.
func (f *tiledFlags) checkDeviceMemory(given string, mem int64, data taskData, stderr io.Writer) error {
	if f.b <= 0 || (f.precision != 32 && f.precision != 64) {
		return nil // the app refuses the shape itself
	}
	least, most, biggest := data(f)
	switch {
	case float64(mem) < least:
		return fmt.Errorf("%w: %s cannot hold the data of any tile task (at least %s with -b %d fp%d): no task would run on the device", errUsage, given, tiled.FormatBytes(least), f.b, f.precision)
	case float64(mem) < most && f.deviceOnly:
		return fmt.Errorf("%w: %s cannot hold the data of %s (%s with -b %d fp%d), which -device-only must run on the device", errUsage, given, biggest, tiled.FormatBytes(most), f.b, f.precision)
	case float64(mem) < most:
		fmt.Fprintf(stderr, "pzrun: note: %s cannot hold the data of %s (%s with -b %d fp%d): those tasks run on the CPUs\n", given, biggest, tiled.FormatBytes(most), f.b, f.precision)
	}
	return nil
}

// tiledApp is an app of the tiled family: the shared flags, the policy
// check, the printing and the --check verdict. oneRank apps run on one
// rank's scheduler; data sizes their tasks for the devices' memory;
// check (nil: none) refuses flags the app does not serve.
func tiledApp(name, summary, what string, oneRank bool, data taskData, check func(f *tiledFlags) error, run tiledRun) app {
	return app{
		name:    name,
		summary: summary,
		oneRank: oneRank,
		setup: func(fs *flag.FlagSet, e *env) func(context.Context, *runtimeview.RuntimeView) error {
			var f tiledFlags
			f.define(fs, 2048)
			// The flags' checks, before any rank starts (env.validate);
			// ranks -1 leaves those that need the job's size to the ranks.
			e.validate = func(ranks int, notes io.Writer) error {
				if err := validPolicy(f.policy); err != nil {
					return err
				}
				if err := checkTraceFile("-trace", f.trace); err != nil {
					return err
				}
				if _, _, err := f.gridPQ(); err != nil {
					return err
				}
				devs, err := f.simDevices()
				if err != nil {
					return err
				}
				cudaMem, err := f.cudaMemLimit()
				if err != nil {
					return err
				}
				if len(devs) > 0 && devs[0].Memory > 0 {
					if err := f.checkDeviceMemory("-sim-mem "+f.simMem, devs[0].Memory, data, notes); err != nil {
						return err
					}
				}
				if cudaMem > 0 {
					if err := f.checkDeviceMemory("-cuda-mem "+f.cudaMem, cudaMem, data, notes); err != nil {
						return err
					}
				}
				// The same sizes given through the environment, which the
				// scheduler reads where the flags are not given.
				set := func(k string) bool { return e.getenv(k) != "" && e.getenv(k) != "0" }
				sims := f.sims > 0 || f.sims == 0 && set("PZ_NSIM")
				gpus := f.cuda != 0 || set("PZ_NCUDA")
				for _, v := range []struct {
					name string
					used bool
				}{
					{"PZ_SIM_MEMORY", f.simMem == "" && sims},
					{"PZ_LIMIT_CUDA_MEM", f.cudaMem == "" && (sims || gpus)},
				} {
					if val := e.getenv(v.name); v.used && val != "" {
						if m, err := scheduler.ParseBytes(val); err == nil && m > 0 {
							if err := f.checkDeviceMemory(v.name+"="+val, m, data, notes); err != nil {
								return err
							}
						}
					}
				}
				if check != nil {
					if err := check(&f); err != nil {
						return err
					}
				}
				if f.deviceOnly && (ranks > 1 || f.grid != "") {
					return fmt.Errorf("%w: -device-only serves one-rank runs so far", errUsage)
				}
				if f.cudaRef && f.cuda == 0 {
					return fmt.Errorf("%w: -cuda-reference compares with the tiled run on GPUs: give -cuda N too", errUsage)
				}
				if f.cudaRef && (ranks > 1 || f.grid != "") {
					return fmt.Errorf("%w: -cuda-reference serves one-rank runs", errUsage)
				}
				// The matrix's shape and the process grid, as the run
				// checks them.
				precision, seed := f.precision, uint64(1)
				if err := tiled.Prepare(f.n, f.b, &precision, &seed, f.workers, f.warmup); err != nil {
					return badOptions(err, tiled.ErrBadOptions)
				}
				if p, q, _ := f.gridPQ(); ranks > 0 && (ranks > 1 || f.grid != "") {
					if err := tiled.PrepareGrid(ranks, &p, &q); err != nil {
						return badOptions(err, tiled.ErrBadOptions)
					}
				}
				return nil
			}
			return func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				// Checked before the ranks started, where the job's size
				// was known; the notes were said then.
				if err := e.validate(rt.Size(), io.Discard); err != nil {
					return err
				}
				r, measure, tol, err := run(ctx, rt, &f, e.progress)
				if err != nil {
					return err
				}
				if rt.Rank() != 0 {
					return nil
				}
				if dw, ok := r.(interface{ DeviceWorkers() int }); ok && f.cuda != 0 && dw.DeviceWorkers() == 0 {
					fmt.Fprintln(e.stderr, "pzrun: -cuda: no CUDA GPU here (no driver, or no device): the tiles ran on the CPUs")
				}
				if err := printResult(e, f.json, r); err != nil {
					return err
				}
				if f.check && measure > tol {
					return fmt.Errorf("%s %.3g above the tolerance %.3g", what, measure, tol)
				}
				return nil
			}
		},
	}
}

func choleskyApp() app {
	return tiledApp("cholesky",
		"tiled Cholesky factorization (POTRF, TRSM, SYRK, GEMM tile tasks) over every rank: GFLOP/s, efficiency, tiles sent, residual with --check",
		"residual", false,
		func(f *tiledFlags) (float64, float64, string) {
			tile := tiled.MatrixBytes(f.b, f.precision)
			return tile, 3 * tile, "a GEMM task (3 tiles)" // POTRF: 1 tile
		}, nil,
		func(ctx context.Context, rt *runtimeview.RuntimeView, f *tiledFlags, progress io.Writer) (fmt.Stringer, float64, float64, error) {
			p, q, _ := f.gridPQ()
			opts := cholesky.Options{
				N: f.n, Block: f.b, Precision: f.precision, Policy: f.policy, Workers: f.workers,
				Check: f.check, Warmup: f.warmup, SchedulerOptions: f.schedulerOptions(), GridP: p, GridQ: q,
				DeviceOnly: f.deviceOnly, GPUReference: f.cudaRef, Pageable: f.pageable,
			}
			var r *cholesky.Result
			var err error
			if rt.Size() == 1 && f.grid == "" {
				r, err = cholesky.Run(ctx, opts, progress)
			} else {
				opts.SchedulerOptions = f.distSchedulerOptions()
				if r, err = cholesky.RunDist(ctx, rt, opts, progress); err == nil {
					err = writeDistTrace(ctx, rt, f.trace)
				}
			}
			if errors.Is(err, tiled.ErrBadOptions) {
				return nil, 0, 0, badOptions(err, tiled.ErrBadOptions) // a flag combination: status 2
			}
			if err != nil {
				return nil, 0, 0, err
			}
			return r, r.Residual, cholesky.Tolerance(f.precision, f.n), nil
		})
}

func gemmApp() app {
	return tiledApp("gemm",
		"tiled matrix product C -= A·Bᵀ over every rank: GFLOP/s, efficiency, bytes sent, sampled error with --check",
		"error", false,
		func(f *tiledFlags) (float64, float64, string) {
			// Each task: C's tile and the b×n panels of A and B it reads.
			task := tiled.MatrixBytes(f.b, f.precision) * (1 + 2*float64(f.n)/float64(f.b))
			return task, task, "a tile task (a tile of C, a panel of A and one of B)"
		},
		func(f *tiledFlags) error {
			if f.deviceOnly {
				return fmt.Errorf("%w: -device-only is cholesky's: gemm's tiles run wherever the policy puts them", errUsage)
			}
			return nil
		},
		func(ctx context.Context, rt *runtimeview.RuntimeView, f *tiledFlags, progress io.Writer) (fmt.Stringer, float64, float64, error) {
			p, q, _ := f.gridPQ()
			opts := gemm.Options{
				N: f.n, Block: f.b, Precision: f.precision, Policy: f.policy, Workers: f.workers,
				Check: f.check, Warmup: f.warmup, SchedulerOptions: f.schedulerOptions(), GridP: p, GridQ: q,
				GPUReference: f.cudaRef, Pageable: f.pageable,
			}
			var r *gemm.Result
			var err error
			if rt.Size() == 1 && f.grid == "" {
				r, err = gemm.Run(ctx, opts, progress)
			} else {
				opts.SchedulerOptions = f.distSchedulerOptions()
				if r, err = gemm.RunDist(ctx, rt, opts, progress); err == nil {
					err = writeDistTrace(ctx, rt, f.trace)
				}
			}
			if errors.Is(err, tiled.ErrBadOptions) {
				return nil, 0, 0, badOptions(err, tiled.ErrBadOptions)
			}
			if err != nil {
				return nil, 0, 0, err
			}
			return r, r.MaxRelErr, gemm.Tolerance(f.precision, f.n), nil
		})
}

func benchTasksApp() app {
	return app{
		name:    "bench tasks",
		summary: "µs per task (independent, chained, 4 handles) and efficiency by grain, vs StarPU and OpenMP; JSON lines or a table",
		oneRank: true,
		setup: func(fs *flag.FlagSet, e *env) func(context.Context, *runtimeview.RuntimeView) error {
			policies := fs.String("policies", strings.Join(scheduler.Policies(), ","), "comma-separated policies")
			cases := fs.String("cases", "indep,chain,handles4,grain", "comma-separated cases")
			tasks := fs.Int("tasks", 100000, "tasks per timed round")
			rounds := fs.Int("rounds", 7, "timed rounds (the median is printed)")
			peerFile := fs.String("peer-file", "", "StarPU figures as `FILE` of 'name value unit' lines (e.g. ../shared/peers/starpu/results-2core.txt)")
			runPeer := fs.Bool("starpu", true, "measure StarPU in the same invocation when it is installed and no -peer-file is given")
			runOMP := fs.Bool("openmp", true, "measure the OpenMP peer in the same invocation (built with -cc; skipped with a note when it cannot be)")
			cc := fs.String("cc", "cc", "C `compiler` for the OpenMP peer (run as CC -O2 -fopenmp)")
			paired := fs.Bool("openmp-paired", true, "run the OpenMP peer one round at a time beside each of pz's rounds (openmp_paired_ratio: the median of the pairs' ratios, steady when the machine's speed changes between runs); false: one run per case before pz's")
			submitters := fs.String("submitters", "1,2", "comma-separated counts of goroutines submitting concurrently")
			work := fs.Bool("submitters-work", false, "make each submitting goroutine one of the workers (a scheduler Driver: Driver.Submit runs ready tasks at once past 8 in flight per worker, Driver.WaitAll runs tasks), as OpenMP's creating thread is one of its team")
			batch := fs.Int("batch", 0, "submit through a scheduler.Batch flushed every `N` tasks (0: one Submit per task)")
			format := fs.String("format", "json", "output: json (one object per line, as measured) or table (after the last measurement)")
			asJSON := fs.Bool("json", false, "print JSON lines, as -format json (the default) does")
			// options checks the flags and returns the bench's options:
			// before any rank starts (env.validate), and on the rank that
			// runs the bench.
			options := func() (benchtasks.Options, error) {
				// benchtasks reads 0 as its defaults: refuse it here.
				if *tasks < 2 || *rounds < 1 {
					return benchtasks.Options{}, fmt.Errorf("%w: -tasks %d and -rounds %d: want at least 2 tasks and 1 round", errUsage, *tasks, *rounds)
				}
				if *batch < 0 {
					return benchtasks.Options{}, fmt.Errorf("%w: -batch %d: want a number of tasks >= 0 (0: one Submit per task)", errUsage, *batch)
				}
				if *batch > 0 && *work {
					// Before the peers run, not after.
					return benchtasks.Options{}, fmt.Errorf("%w: -batch %d with -submitters-work: a working submitter (a Driver) submits one task at a time; drop one of them", errUsage, *batch)
				}
				opts := benchtasks.Options{Tasks: *tasks, Rounds: *rounds, SubmittersWork: *work, Batch: *batch}
				if *format != "json" && *format != "table" {
					return opts, fmt.Errorf("%w: -format %q: json or table", errUsage, *format)
				}
				if *asJSON && *format != "json" {
					return opts, fmt.Errorf("%w: -json with -format %s: give one of them", errUsage, *format)
				}
				for _, p := range strings.Split(*policies, ",") {
					if err := validPolicy(p); err != nil {
						return opts, err
					}
					opts.Policies = append(opts.Policies, p)
				}
				for _, f := range strings.Split(*submitters, ",") {
					n, err := strconv.Atoi(strings.TrimSpace(f))
					if err != nil || n < 1 {
						return opts, fmt.Errorf("%w: -submitters %q: a comma-separated list of counts ≥ 1", errUsage, *submitters)
					}
					if *work && n > benchtasks.DefaultWorkers() {
						return opts, fmt.Errorf("%w: -submitters %d with -submitters-work: each submitter is one of the %d workers", errUsage, n, benchtasks.DefaultWorkers())
					}
					opts.Submitters = append(opts.Submitters, n)
				}
				for _, c := range strings.Split(*cases, ",") {
					switch benchtasks.Case(c) {
					case benchtasks.CaseIndep, benchtasks.CaseChain, benchtasks.CaseHandles4, benchtasks.CaseGrain:
					default:
						// Before the peers run, not after.
						return opts, fmt.Errorf("%w: unknown case %q (valid: indep, chain, handles4, grain)", errUsage, c)
					}
					opts.Cases = append(opts.Cases, benchtasks.Case(c))
				}
				return opts, nil
			}
			e.validate = func(int, io.Writer) error {
				_, err := options()
				return err
			}
			return func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				opts, err := options()
				if err != nil {
					return err
				}
				switch {
				case *peerFile != "":
					fh, err := os.Open(*peerFile)
					if err != nil {
						return fmt.Errorf("%w: %v", errUsage, err)
					}
					defer fh.Close()
					if opts.Peer, err = benchtasks.ParsePeer(fh); err != nil {
						return err
					}
				case *runPeer:
					peer, err := benchtasks.RunStarPU(ctx, benchtasks.StarPUConfig{
						Policies: opts.Policies, Workers: runtime.GOMAXPROCS(0), Tasks: *tasks, Rounds: *rounds,
						PeerDir: peerdir.Find("starpu"),
					})
					if errors.Is(err, benchtasks.ErrNoStarPU) {
						fmt.Fprintf(e.stderr, "pzrun bench tasks: no peer figures: %v (or pass -peer-file)\n", err)
					} else if err != nil {
						return err
					} else {
						opts.Peer = peer
					}
				}
				if *runOMP && *paired && slices.ContainsFunc(opts.Cases, func(c benchtasks.Case) bool { return benchtasks.OpenMPName(c, 1) != "" }) {
					peer, err := benchtasks.NewOpenMPPeer(ctx, *cc, nil)
					switch {
					case errors.Is(err, benchtasks.ErrNoOpenMP):
						fmt.Fprintf(e.stderr, "pzrun bench tasks: no OpenMP figures: %v\n", err)
					case err != nil:
						return err
					default:
						defer peer.Close()
						opts.PairedOpenMP = peer.Paired()
					}
				} else if *runOMP {
					omp, err := benchtasks.RunOpenMP(ctx, benchtasks.OpenMPConfig{
						CC: *cc, Workers: []int{benchtasks.DefaultWorkers()}, Cases: opts.Cases, Tasks: *tasks, Rounds: *rounds,
					})
					switch {
					case errors.Is(err, benchtasks.ErrNoOpenMP):
						fmt.Fprintf(e.stderr, "pzrun bench tasks: no OpenMP figures: %v\n", err)
					case errors.Is(err, benchtasks.ErrBadOptions):
						return badOptions(err, benchtasks.ErrBadOptions)
					case err != nil:
						return err
					default:
						opts.OpenMP = omp
					}
				}
				out := e.stdout
				if *format == "table" {
					out = io.Discard
				}
				// A bar of the figures measured, on a terminal's stderr:
				// the table comes after the last, a minute or more by
				// default, and JSON lines sent to a file show nothing.
				// Not while the lines go to the terminal: they are the
				// progress there, and would cut the bar.
				if *format == "table" || !isTerminal(e.rawStdout) {
					opts.Grains = benchGrains
					bar := newBar(e.progress, "bench tasks figures", benchTasksRecords(opts))
					defer bar.Done()
					out = &lineCounter{w: out, bar: bar}
				}
				recs, err := benchtasks.Run(ctx, opts, out)
				if errors.Is(err, benchtasks.ErrBadOptions) {
					return badOptions(err, benchtasks.ErrBadOptions)
				}
				if err != nil {
					return err
				}
				if *format == "table" {
					return benchtasks.WriteTable(e.stdout, recs)
				}
				return nil
			}
		},
	}
}

// benchGrains are the grain case's task durations in µs
// (benchtasks.Options.Grains).
var benchGrains = []int{1, 16, 256}

// benchTasksRecords is how many records benchtasks.Run writes for opts
// (one worker count): per policy and submitter count, one per overhead
// case and one per grain.
func benchTasksRecords(opts benchtasks.Options) int {
	per := 0
	for _, c := range opts.Cases {
		if c == benchtasks.CaseGrain {
			per += len(opts.Grains)
		} else {
			per++
		}
	}
	return len(opts.Policies) * len(opts.Submitters) * per
}

// newBar is progress.New; a test draws the bar without a terminal.
var newBar = progress.New

// lineCounter passes writes on to w and adds each line written to bar.
type lineCounter struct {
	w   io.Writer
	bar *progress.Bar
}

func (l *lineCounter) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	l.bar.Add(bytes.Count(p[:n], []byte("\n")))
	return n, err
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// minSimBandwidth is the slowest simulated link pzrun accepts (-sim-bw):
// 1 MB/s, where calibrating the link takes about a second.
const minSimBandwidth = 1_000_000
