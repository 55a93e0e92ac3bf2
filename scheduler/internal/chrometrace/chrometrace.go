// Package chrometrace writes the Trace Event Format (the JSON that
// Perfetto and chrome://tracing open): complete events ("X"), flow
// arrows ("s"/"f"), instants ("i") and metadata naming processes and
// threads ("M"). The scheduler, the distributed scheduler and static
// schedules write their traces through it.
package chrometrace

import (
	"encoding/json"
	"io"
	"time"
)

// An Event is one trace event. Times are in microseconds.
type Event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	ID   uint64         `json:"id,omitempty"`
	Bp   string         `json:"bp,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// Micros converts a duration to the format's microseconds.
func Micros(d time.Duration) float64 { return float64(d) / 1e3 }

// ProcessName is the metadata event naming process pid.
func ProcessName(pid int, name string) Event {
	return Event{Name: "process_name", Ph: "M", Pid: pid, Args: map[string]any{"name": name}}
}

// ThreadName is the metadata event naming thread tid of process pid.
func ThreadName(pid, tid int, name string) Event {
	return Event{Name: "thread_name", Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"name": name}}
}

// A Writer streams events into one trace document: Emit each event, then
// Close. The first error is kept and returned by every later call.
type Writer struct {
	w       io.Writer
	enc     *json.Encoder
	started bool
	n       int
	err     error
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w, enc: json.NewEncoder(w)} }

func (t *Writer) write(s string) {
	if t.err == nil {
		_, t.err = io.WriteString(t.w, s)
	}
}

func (t *Writer) start() {
	if !t.started {
		t.started = true
		t.write("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")
	}
}

// Emit writes one event.
func (t *Writer) Emit(e Event) error {
	t.start()
	if t.n > 0 {
		t.write(",")
	}
	t.n++
	if t.err == nil {
		t.err = t.enc.Encode(e)
	}
	return t.err
}

// Close ends the document (an empty one if nothing was emitted).
func (t *Writer) Close() error {
	t.start()
	t.write("]}\n")
	return t.err
}

// CloseWithMetadata ends the document with meta as its "metadata"
// object, beside the events (the format's trace-wide metadata: readers
// that do not know it skip it).
func (t *Writer) CloseWithMetadata(meta map[string]any) error {
	t.start()
	t.write("],\"metadata\":")
	if t.err == nil {
		t.err = t.enc.Encode(meta)
	}
	t.write("}\n")
	return t.err
}
