package scheduler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A PerfModel names a performance model of a codelet. The measurements
// live in the Scheduler (keyed by the model's name), not in the
// PerfModel, so one PerfModel value may be shared by schedulers.
type PerfModel struct {
	// Name identifies the model, and its file in the model directory:
	// Name.host.json, with the bytes of Name other than ASCII letters,
	// digits, '.', '-' and '_' percent-escaped ("a/b" is a%2Fb), so that
	// two names never share a file (a file name past 255 bytes is cut
	// and ends with '~' and a hash of Name). It must not be empty (Submit
	// fails with ErrBadModel).
	Name string
}

// HistoryModel returns a history-based performance model: the mean
// execution time per data footprint (see Task.Footprint) and worker
// kind, measured in every run and saved across runs (StarPU's
// STARPU_HISTORY_BASED). Once calibrated, an entry leaves out a
// measurement more than 1.5 times slower or faster than its mean and
// three standard deviations away (a garbage collection's pause, a
// preempted thread), unless as many are left out as kept: then the times
// have changed, and the entry starts again from the latest.
func HistoryModel(name string) *PerfModel { return &PerfModel{Name: name} }

// minSamples is how many measurements make a history entry calibrated
// (StarPU's STARPU_CALIBRATE_MINIMUM): until then dmda and ModelEstimate
// do not use it.
const minSamples = 10

type modelKey struct {
	footprint uint64
	kind      WorkerKind
}

// modelEntry accumulates measurements with Welford's running mean and
// variance (Knuth, TAOCP vol. 2, 4.2.2), leaving out outliers (see add).
type modelEntry struct {
	n    int64
	mean float64
	m2   float64
	// rejected counts the measurements add left out as outliers since
	// the entry started (not saved: a loaded entry starts at 0).
	rejected int64
	// size is the bytes of the data of the entry's tasks (dataSize),
	// known if sized: an entry of a file written before pz recorded
	// sizes has none until a task of its footprint runs again.
	size  int64
	sized bool
}

// restart empties the entry of its measurements; the size of its tasks'
// data stays.
func (e *modelEntry) restart() { *e = modelEntry{size: e.size, sized: e.sized} }

// dataSize returns the bytes of the data of a task with the accesses acc,
// summed over the accesses (StarPU's _starpu_job_get_data_size): rows x
// columns x element size, the size of the registered value for a value
// handle. A handle accessed twice counts twice, as in StarPU.
func dataSize(acc []Access) int64 {
	var n int64
	for i := range acc {
		b := &acc[i].Handle.ram
		n += int64(b.rows) * int64(b.cols) * int64(b.elemSize)
	}
	return n
}

// outlierFactor and outlierSigmas bound the measurements a calibrated
// history entry takes in: one more than outlierFactor times slower or
// faster than the mean, and more than outlierSigmas standard deviations
// away from it, is left out (StarPU's STARPU_HISTORY_MAX_ERROR, 50% by
// default, with the deviation besides). A Go task's time includes
// whatever stopped its goroutine meanwhile - a garbage collection's
// pause, the OS preempting the thread - and one 20 ms pause in the ten
// measurements that calibrate a 1 ms kernel tripled its mean, which dmda
// then believed. The deviation keeps tasks whose times scatter widely
// anyway (a few hundred nanoseconds of work, where the clock and the
// scheduler's own jitter are of the task's size) calibrating as before.
const (
	outlierFactor = 1.5
	outlierSigmas = 3
)

// outlier reports whether x is an outlier of a calibrated entry (see
// outlierFactor).
func (e *modelEntry) outlier(x float64) bool {
	if e.n < minSamples || !(e.mean > 0) {
		return false
	}
	sd := math.Sqrt(e.m2 / float64(e.n))
	return (x > e.mean*outlierFactor || x*outlierFactor < e.mean) && math.Abs(x-e.mean) > outlierSigmas*sd
}

// What add did with a measurement.
const (
	addIgnored   = iota // not a duration, or an outlier left out
	addKept             // taken in
	addRestarted        // the entry started again from it
)

// add records the measurement x (ns). Once the entry is calibrated, an
// outlier is left out; but once as many have been left out as kept, the
// times have changed for good (another load on the machine, a slower
// clock), and the entry starts again from x. It returns what it did
// (addKept, ...).
func (e *modelEntry) add(x float64) int {
	if !(x >= 0) || math.IsInf(x, 1) {
		return addIgnored // not a duration: it would poison the mean
	}
	res := addKept
	if e.n < 0 {
		e.restart() // never loaded (see validEntry); start afresh
	}
	if e.outlier(x) {
		if e.rejected++; e.rejected < e.n {
			return addIgnored
		}
		e.restart()
		res = addRestarted
	}
	e.push(x)
	return res
}

// push takes x into the running mean and variance.
func (e *modelEntry) push(x float64) {
	// n saturates rather than wrapping to a negative or zero divisor:
	// past 2^63 samples, each weighs 1/2^63.
	if e.n < math.MaxInt64 {
		e.n++
	}
	d := x - e.mean
	e.mean += d / float64(e.n)
	e.m2 += d * (x - e.mean)
}

// merged returns the entry of the measurements of a and b together
// (Chan, Golub and LeVeque's pairwise update of the mean and the sum of
// squares), its count saturating as push's does, with b's data size if
// it has one, else a's.
func merged(a, b modelEntry) modelEntry {
	out := modelEntry{size: a.size, sized: a.sized}
	if b.sized {
		out.size, out.sized = b.size, true
	}
	switch {
	case a.n <= 0:
		out.n, out.mean, out.m2 = b.n, b.mean, b.m2
	case b.n <= 0:
		out.n, out.mean, out.m2 = a.n, a.mean, a.m2
	default:
		na, nb := float64(a.n), float64(b.n)
		n := na + nb
		d := b.mean - a.mean
		out.mean, out.m2, out.n = a.mean+d*nb/n, a.m2+b.m2+d*d*na*nb/n, math.MaxInt64
		if a.n <= math.MaxInt64-b.n {
			out.n = a.n + b.n
		}
	}
	return out
}

// runEntry is what this run measured of a model entry, to be merged into
// the file as save finds it (another scheduler, of this process or
// another, may have saved the model since it was loaded).
type runEntry struct {
	modelEntry // the measurements kept since the load, or the restart
	// restarted: the entry started again (see add) and replaces the
	// file's.
	restarted bool
}

type modelData struct {
	mu      sync.Mutex
	entries map[modelKey]*modelEntry
	// run holds this run's measurements per entry, which save merges
	// into the file.
	run   map[modelKey]*runEntry
	dirty bool
	// bad is why the model's file was not loaded (it cannot be read or
	// parsed, or holds invalid values): the model starts uncalibrated,
	// the file is never overwritten, and Close reports it (save).
	bad error
}

// modelStore holds a scheduler's performance models, loaded lazily from
// dir and saved back by save.
type modelStore struct {
	dir    string
	host   string
	mu     sync.Mutex
	models map[string]*modelData
	// busErr is the error of saving the bus model (calibrateBus), for
	// save to report with the others'.
	busErr error
}

func newModelStore(dir string) *modelStore {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return &modelStore{dir: dir, host: host, models: make(map[string]*modelData)}
}

func (ms *modelStore) get(name string) *modelData {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	md := ms.models[name]
	if md == nil {
		md = &modelData{entries: make(map[modelKey]*modelEntry), run: make(map[modelKey]*runEntry)}
		if entries, err := ms.load(name); err != nil {
			md.bad = err
		} else if entries != nil {
			md.entries = entries
		}
		ms.models[name] = md
	}
	return md
}

// record takes in the measurement ns of task t, of model m, on a worker
// of kind k. It sums the sizes of t's data only for an entry that lacks
// its size (a new one, one of an earlier file): once per footprint.
func (ms *modelStore) record(m *PerfModel, t *Task, k WorkerKind, ns float64) {
	md := ms.get(m.Name)
	md.mu.Lock()
	key := modelKey{t.footprint, k}
	e := md.entries[key]
	if e == nil {
		e = &modelEntry{}
		md.entries[key] = e
	}
	if !e.sized {
		e.size, e.sized = dataSize(t.Access), true
	}
	r := md.run[key]
	if r == nil {
		r = &runEntry{}
		md.run[key] = r
	}
	switch e.add(ns) {
	case addKept:
		r.push(ns)
	case addRestarted:
		*r = runEntry{modelEntry: modelEntry{n: e.n, mean: e.mean, m2: e.m2}, restarted: true}
	}
	md.dirty = true
	md.mu.Unlock()
}

// lookup returns the mean time of a calibrated entry.
func (ms *modelStore) lookup(m *PerfModel, fp uint64, k WorkerKind) (float64, bool) {
	md := ms.get(m.Name)
	md.mu.Lock()
	defer md.mu.Unlock()
	e := md.entries[modelKey{fp, k}]
	if e == nil || e.n < minSamples {
		return 0, false
	}
	return e.mean, true
}

func (s *Scheduler) estimate(t *Task, k WorkerKind) (float64, bool) {
	m := t.Codelet.Model
	if m == nil {
		return 0, false
	}
	return s.models.lookup(m, t.footprint, k)
}

// ModelEstimate returns the calibrated mean execution time in ns of
// codelet cl on a worker of kind k for a task with the accesses in args
// (other arguments are ignored); ok is false if the codelet has no model
// or it is not calibrated for those data shapes.
func (s *Scheduler) ModelEstimate(cl *Codelet, k WorkerKind, args ...Arg) (ns float64, ok bool) {
	if cl == nil || cl.Model == nil || cl.Model.Name == "" {
		return 0, false
	}
	t := NewTask(cl, args...)
	return s.models.lookup(cl.Model, footprint(t.Access), k)
}

// modelFile is the on-disk form of one model.
type modelFile struct {
	Model   string           `json:"model"`
	Host    string           `json:"host"`
	Entries []modelFileEntry `json:"entries"`
}

// modelFileEntry is one entry of a model file: what the tasks of one
// footprint measured on one worker kind (docs/scheduler.md describes the
// fields).
type modelFileEntry struct {
	Footprint uint64 `json:"footprint"`
	Kind      string `json:"kind"`
	// Size is the bytes of the data of the entry's tasks (dataSize);
	// nil in a file written before pz recorded sizes, and for such an
	// entry until a task of its footprint runs again.
	Size     *int64  `json:"size,omitempty"`
	N        int64   `json:"n"`
	MeanNs   float64 `json:"mean_ns"`
	StddevNs float64 `json:"stddev_ns"`
}

// maxFileName is the longest file name most file systems take (ext4,
// XFS, Btrfs, APFS, NTFS: NAME_MAX 255 bytes).
const maxFileName = 255

func (ms *modelStore) path(name string) string {
	return filepath.Join(ms.dir, modelFileName(name, ms.host))
}

// modelFileName is the file name of model name on host: fileSafe(name),
// the host and .json; where that is longer than maxFileName, the escaped
// name is cut (at an escape's start) and ends with '~' and a hash of the
// whole name ('~' is never in fileSafe's names, so such a name is not
// another model's). A long name - 30 CJK characters escape to 270 bytes
// - had no file: every Close failed to save it.
func modelFileName(name, host string) string {
	base, suffix := fileSafe(name), "."+host+".json"
	if len(base)+len(suffix) <= maxFileName {
		return base + suffix
	}
	sum := sha256.Sum256([]byte(name))
	tag := "~" + hex.EncodeToString(sum[:8])
	keep := max(maxFileName-len(suffix)-len(tag), 0)
	keep = min(keep, len(base))
	for i := max(keep-2, 0); i < keep; i++ {
		if base[i] == '%' {
			keep = i // not within an escape
			break
		}
	}
	return base[:keep] + tag + suffix
}

// load reads a model file if there is one, returning its entries (nil
// for no file). A missing file leaves the model uncalibrated; one that
// cannot be read or parsed, or that holds invalid values (validEntry),
// is an error naming the file and what is wrong, wrapping ErrBadModel.
func (ms *modelStore) load(name string) (map[modelKey]*modelEntry, error) {
	if ms.dir == "" {
		return nil, nil
	}
	return ms.read(name, "the file was not used and is kept as it is: fix or remove it (this run's measurements of the model are not saved)")
}

// read reads the file of model name; fate says, in an error, what
// becomes of an invalid one.
func (ms *modelStore) read(name, fate string) (map[modelKey]*modelEntry, error) {
	path := ms.path(name)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: model file %s: %s; %s",
			ErrBadModel, name, path, fmt.Sprintf(format, args...), fate)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil // no file (ENOTDIR: nor a directory to hold it)
	}
	if err != nil {
		return nil, bad("%v", err)
	}
	var f modelFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, bad("not a model file: %v", err)
	}
	if f.Model != name {
		if f.Model != "" && legacyFileSafe(f.Model) == fileSafe(name) {
			// An earlier pz wrote it for a name with other characters
			// than fileSafe keeps, which now has a file of its own.
			return nil, bad("it holds model %q, whose file is now %s (an earlier version of pz gave it this one): rename it to keep that calibration", f.Model, filepath.Base(ms.path(f.Model)))
		}
		return nil, bad("it holds model %q, not %q", f.Model, name)
	}
	entries := make(map[modelKey]*modelEntry, len(f.Entries))
	for i, e := range f.Entries {
		k, err := validEntry(e)
		if err != nil {
			return nil, bad("entry %d (footprint %#x, kind %q): %v", i, e.Footprint, e.Kind, err)
		}
		key := modelKey{e.Footprint, k}
		if entries[key] != nil {
			return nil, bad("entry %d: footprint %#x, kind %q appears twice", i, e.Footprint, e.Kind)
		}
		me := &modelEntry{n: e.N, mean: e.MeanNs, m2: e.StddevNs * e.StddevNs * float64(e.N)}
		if e.Size != nil {
			me.size, me.sized = *e.Size, true
		}
		entries[key] = me
	}
	return entries, nil
}

// validEntry checks the values of a model file's entry and returns its
// worker kind: a kind of this build, a size >= 0 if there is one, a
// count n >= 0, and a finite mean and standard deviation >= 0 (in ns)
// whose sum of squares fits a float64.
func validEntry(e modelFileEntry) (WorkerKind, error) {
	k := numKinds
	for x := range numKinds {
		if e.Kind == x.String() {
			k = x
		}
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case k == numKinds:
		var kinds []string
		for x := range numKinds {
			kinds = append(kinds, x.String())
		}
		return k, fmt.Errorf("unknown worker kind (want one of %s)", strings.Join(kinds, ", "))
	case e.Size != nil && *e.Size < 0:
		return k, fmt.Errorf("size = %d, want bytes >= 0", *e.Size)
	case e.N < 0:
		return k, fmt.Errorf("n = %d, want >= 0", e.N)
	case !finite(e.MeanNs) || e.MeanNs < 0:
		return k, fmt.Errorf("mean_ns = %g, want a time >= 0", e.MeanNs)
	case !finite(e.StddevNs) || e.StddevNs < 0:
		return k, fmt.Errorf("stddev_ns = %g, want a time >= 0", e.StddevNs)
	case !finite(e.StddevNs * e.StddevNs * float64(e.N)):
		return k, fmt.Errorf("stddev_ns = %g with n = %d overflows", e.StddevNs, e.N)
	}
	return k, nil
}

// save writes every model changed since it was loaded, atomically,
// except those whose file was invalid (modelData.bad): it returns their
// errors with the errors of writing the others and of saving the bus
// model.
//
// Another scheduler - an in-process rank, another process - may have
// saved a model since this one loaded it: each model's file is read
// again and this run's measurements merged into it (runEntry), with
// the directory locked meanwhile, so that the last to save does not
// erase the entries, and the measurements, of the others.
func (ms *modelStore) save() error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	errs := []error{ms.busErr}
	if ms.dir == "" {
		return errors.Join(errs...)
	}
	names := make([]string, 0, len(ms.models))
	for name := range ms.models {
		names = append(names, name)
	}
	sort.Strings(names)
	var unlock func()
	for _, name := range names {
		md := ms.models[name]
		md.mu.Lock()
		if md.bad != nil {
			errs = append(errs, md.bad)
			md.mu.Unlock()
			continue
		}
		if !md.dirty {
			md.mu.Unlock()
			continue
		}
		if unlock == nil {
			var locked bool
			if unlock, locked = lockModelDir(ms.dir); locked {
				removeDeadTemps(ms.dir)
			}
		}
		if err := ms.saveModel(name, md); err != nil {
			errs = append(errs, err)
		}
		md.mu.Unlock()
	}
	if unlock != nil {
		unlock()
	}
	return errors.Join(errs...)
}

// saveModel merges md's measurements of this run into the file of model
// name as it is now and writes it; md.mu is held.
func (ms *modelStore) saveModel(name string, md *modelData) error {
	disk, err := ms.read(name, "the file is kept as it is and this run's measurements of the model are not saved: fix or remove it")
	if err != nil {
		return err
	}
	all := make(map[modelKey]*modelEntry, len(md.entries)+len(disk))
	maps.Copy(all, disk)
	for k, e := range md.entries {
		r, d := md.run[k], disk[k]
		switch {
		case d == nil || r != nil && r.restarted:
			all[k] = e
		case r != nil:
			m := merged(*d, r.modelEntry)
			if e.sized { // the run's tasks' size, not the file's, if any
				m.size, m.sized = e.size, true
			}
			all[k] = &m
		}
	}
	f := modelFile{Model: name, Host: ms.host}
	for k, e := range all {
		sd := 0.0
		if e.n > 0 {
			sd = math.Sqrt(e.m2 / float64(e.n))
		}
		fe := modelFileEntry{Footprint: k.footprint, Kind: k.kind.String(), N: e.n, MeanNs: e.mean, StddevNs: sd}
		if e.sized {
			size := e.size
			fe.Size = &size
		}
		f.Entries = append(f.Entries, fe)
	}
	sort.Slice(f.Entries, func(i, j int) bool {
		a, b := f.Entries[i], f.Entries[j]
		if a.Footprint != b.Footprint {
			return a.Footprint < b.Footprint
		}
		return a.Kind < b.Kind
	})
	if err := writeFileLocked(ms.path(name), f); err != nil {
		return fmt.Errorf("scheduler: saving performance model %q to %s: %w", name, ms.path(name), err)
	}
	// What is saved is what this scheduler now knows: a later save
	// merges only what it measures after this one.
	md.entries, md.run, md.dirty = all, make(map[modelKey]*runEntry), false
	return nil
}

// lockModelDir locks the model directory dir for a read, merge and write
// of model files, and returns the unlock. The lock is a flock of a file
// opened for it, so it orders the saves of this process's schedulers
// (in-process ranks) as well as other processes': a flock belongs to
// the open file, and two opens of one file exclude each other. Where
// the directory cannot be locked (not there and not creatable: the
// writes report it; a file system without flock), the saves of other
// processes are not excluded; and a lock held for more than lockWait (a
// process stopped while it saves) is gone past, so that Close never
// hangs on another process. locked reports whether the lock is held.
func lockModelDir(dir string) (unlock func(), locked bool) {
	done := func() {}
	if os.MkdirAll(dir, 0o755) != nil {
		return done, false
	}
	d, err := os.Open(dir)
	if err != nil {
		return done, false
	}
	fd := int(d.Fd())
	for deadline := time.Now().Add(lockWait); ; {
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EWOULDBLOCK && err != unix.EINTR || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err != nil {
		d.Close()
		return done, false
	}
	return func() { d.Close() }, true // Close releases the flock
}

// removeDeadTemps removes the temporary files (tempName) that writers
// killed while saving left in dir. dir is locked (lockModelDir): every
// writer of the directory holds the lock while its temporary file
// exists (writeFileLocked's callers), so one found now belongs to a
// writer that died. Only regular files named as tempName names them are
// removed; a file that cannot be is left, harmless.
func removeDeadTemps(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.Type().IsRegular() && isTempName(e.Name()) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// tempName is the name of the i-th try at a temporary file of process
// pid at time nanos (writeFileLocked): .tmp-PID-NANOS-I.
func tempName(pid int, nanos int64, i int) string {
	return fmt.Sprintf("%s%d-%d-%d", tempPrefix, pid, nanos, i)
}

const tempPrefix = ".tmp-"

// isTempName reports whether name is one that tempName makes.
func isTempName(name string) bool {
	rest, ok := strings.CutPrefix(name, tempPrefix)
	if !ok {
		return false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// lockWait bounds the wait for another process's save (lockModelDir).
const lockWait = 2 * time.Second

// writeFileAtomic is writeFileLocked with path's directory locked
// (lockModelDir), so that removeDeadTemps, which runs with it locked,
// never takes its temporary file for a dead writer's.
func writeFileAtomic(path string, v any) error {
	unlock, _ := lockModelDir(filepath.Dir(path))
	defer unlock()
	return writeFileLocked(path, v)
}

// writeFileLocked writes v as JSON to path through a new file renamed
// over it, so that a reader sees the old file or the new one, never a
// part; path's directory is locked (lockModelDir), or could not be. The
// new file has the mode of the file it replaces, or 0644 less the umask
// (os.WriteFile's; os.CreateTemp's 0600 made a shared model directory's
// files unreadable to the others).
func writeFileLocked(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var tmp *os.File
	for i := 0; ; i++ {
		name := filepath.Join(dir, tempName(os.Getpid(), time.Now().UnixNano(), i))
		tmp, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || i >= 100 {
			return err
		}
	}
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
			return fail(err)
		}
	}
	if _, err := tmp.Write(b); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
