package scheduler

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// A PerfModel names a performance model of a codelet. The measurements
// live in the Scheduler (keyed by the model's name), not in the
// PerfModel, so one PerfModel value may be shared by schedulers.
type PerfModel struct {
	// Name identifies the model, and its file in the model directory.
	Name string
}

// HistoryModel returns a history-based performance model: the mean
// execution time per data footprint (see Task.Footprint) and worker
// kind, measured in every run and saved across runs (StarPU's
// STARPU_HISTORY_BASED).
func HistoryModel(name string) *PerfModel { return &PerfModel{Name: name} }

// minSamples is how many measurements make a history entry calibrated
// (StarPU's STARPU_CALIBRATE_MINIMUM).
const minSamples = 10

type modelKey struct {
	footprint uint64
	kind      WorkerKind
}

// modelEntry accumulates measurements with Welford's running mean and
// variance (Knuth, TAOCP vol. 2, 4.2.2).
type modelEntry struct {
	n    int64
	mean float64
	m2   float64
}

func (e *modelEntry) add(x float64) {
	e.n++
	d := x - e.mean
	e.mean += d / float64(e.n)
	e.m2 += d * (x - e.mean)
}

type modelData struct {
	mu      sync.Mutex
	entries map[modelKey]*modelEntry
	dirty   bool
}

// modelStore holds a scheduler's performance models, loaded lazily from
// dir and saved back by save.
type modelStore struct {
	dir    string
	host   string
	mu     sync.Mutex
	models map[string]*modelData
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
		md = &modelData{entries: make(map[modelKey]*modelEntry)}
		ms.load(name, md)
		ms.models[name] = md
	}
	return md
}

func (ms *modelStore) record(m *PerfModel, fp uint64, k WorkerKind, ns float64) {
	md := ms.get(m.Name)
	md.mu.Lock()
	e := md.entries[modelKey{fp, k}]
	if e == nil {
		e = &modelEntry{}
		md.entries[modelKey{fp, k}] = e
	}
	e.add(ns)
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
	if cl == nil || cl.Model == nil {
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

type modelFileEntry struct {
	Footprint uint64  `json:"footprint"`
	Kind      string  `json:"kind"`
	N         int64   `json:"n"`
	MeanNs    float64 `json:"mean_ns"`
	StddevNs  float64 `json:"stddev_ns"`
}

func (ms *modelStore) path(name string) string {
	return filepath.Join(ms.dir, fileSafe(name)+"."+ms.host+".json")
}

// load reads a model file if there is one; a missing or unreadable file
// leaves the model uncalibrated (it is recalibrated and rewritten).
func (ms *modelStore) load(name string, md *modelData) {
	if ms.dir == "" {
		return
	}
	b, err := os.ReadFile(ms.path(name))
	if err != nil {
		return
	}
	var f modelFile
	if json.Unmarshal(b, &f) != nil || f.Model != name {
		return
	}
	for _, e := range f.Entries {
		k := numKinds
		for x := range numKinds {
			if e.Kind == x.String() {
				k = x
			}
		}
		if k == numKinds {
			continue // a kind this build does not have
		}
		m2 := e.StddevNs * e.StddevNs * float64(e.N)
		md.entries[modelKey{e.Footprint, k}] = &modelEntry{n: e.N, mean: e.MeanNs, m2: m2}
	}
}

// save writes every model changed since it was loaded, atomically.
func (ms *modelStore) save() error {
	if ms.dir == "" {
		return nil
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	var errs []error
	for name, md := range ms.models {
		md.mu.Lock()
		if !md.dirty {
			md.mu.Unlock()
			continue
		}
		f := modelFile{Model: name, Host: ms.host}
		for k, e := range md.entries {
			sd := 0.0
			if e.n > 0 {
				sd = math.Sqrt(e.m2 / float64(e.n))
			}
			f.Entries = append(f.Entries, modelFileEntry{Footprint: k.footprint, Kind: k.kind.String(), N: e.n, MeanNs: e.mean, StddevNs: sd})
		}
		md.dirty = false
		md.mu.Unlock()
		sort.Slice(f.Entries, func(i, j int) bool {
			a, b := f.Entries[i], f.Entries[j]
			if a.Footprint != b.Footprint {
				return a.Footprint < b.Footprint
			}
			return a.Kind < b.Kind
		})
		if err := writeFileAtomic(ms.path(name), f); err != nil {
			errs = append(errs, fmt.Errorf("scheduler: saving performance model %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func writeFileAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
