package scheduler

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"

	"github.com/pzgo/pz/hardware/accel"
)

// ConflictingOption reports whether options given after a scheduler was
// made (later) ask for the scheduler that the options that made it
// (first) asked for, so that a caller that shares one scheduler between
// several users (runtimeview's Scheduler) can hand it to a later user or
// refuse. It returns nil when every setting the later options make is
// one the first options make: the same options, some of them, the same
// ones in another order, or one given twice whose last value is the
// first options' (as in New, the last one counts). Otherwise it returns
// an error wrapping ErrBadOption that names the option in conflict
// (scheduler.WithWorkers; the earliest in later when several are), its
// position in later (1 for the first) and the values both lists give
// it, as in
//
//	scheduler.WithWorkers(1) (option 2 of the later options) disagrees with the first options, which give scheduler.WithWorkers(2)
//
// An option that sets a zero value conflicts with first options that set
// another: WithStats(false) against WithStats(true), WithTrace("")
// against WithTrace("t.json"). Settings are compared by value (strings,
// numbers, WithSimDevices' devices, WithWorkerNames' maps); pointers
// (WithLogger, WithCUDADriver, WithDevices' devices) agree when they are
// the same, and WithWorkerLinks' links when Go's == says they are equal
// (the same pointer, for a link that is one). A later option that holds a
// function (WithGetenv, WithPolicyFunc, WithWatchdog with a report)
// always conflicts: two functions cannot be told apart, so only the
// first options may give one. ConflictingOption reads no environment
// variable: an option the first list does not give conflicts with a
// later one that gives it, whatever PZ_* says. A nil option in later is
// refused as New refuses one (ErrBadOption, naming its position).
func ConflictingOption(first, later []Option) error {
	for i, o := range later {
		if o == nil {
			return fmt.Errorf("%w: option %d of the later options is nil (an Option variable left unset?)", ErrBadOption, i+1)
		}
	}
	a := applied(config{}, first)
	z := applied(config{}, later)
	b := applied(a, later)
	var conflict error
	conflictAt := len(later) + 1
	for _, s := range optionSettings() {
		if !s.touched(a, z, b) {
			continue
		}
		if s.same(&z, &a) && (s.opaque == nil || !s.opaque(&z)) {
			continue
		}
		at := 0 // the last later option that touches s: the one that counts
		for i, o := range later {
			one := []Option{o}
			if s.touched(a, applied(config{}, one), applied(a, one)) {
				at = i + 1
			}
		}
		if at >= conflictAt {
			continue // name the conflict earliest in later
		}
		firstText := "which do not give scheduler." + s.option
		if s.set(&a) {
			firstText = "which give " + s.text(&a)
		}
		why := ""
		if s.opaque != nil && s.opaque(&z) {
			why = "; an option that holds a function cannot be compared with another, so only the first options may give it"
		}
		conflict = fmt.Errorf("%w: %s (option %d of the later options) disagrees with the first options, %s%s", ErrBadOption, s.text(&z), at, firstText, why)
		conflictAt = at
	}
	return conflict
}

// applied returns base with opts applied in order, nil options skipped.
func applied(base config, opts []Option) config {
	for _, o := range opts {
		if o != nil {
			o(&base)
		}
	}
	return base
}

// optionSetting is a setting of config that an option makes: the entry
// of optionSettings that ConflictingOption compares it through.
type optionSetting struct {
	// option is the exported Option that makes the setting: "WithWorkers".
	option string
	// fields names the config fields it covers, "cuda.n" for a field of
	// a nested struct; TestOptionSettingsCoverConfig checks that every
	// field of config is an entry's or in notOptionFields.
	fields []string
	// set reports whether c, options applied to a zero config, holds the
	// setting: an option gave it, other than as its zero value.
	set func(c *config) bool
	// same reports whether x and y hold the same setting. A func field
	// compares by whether it is nil: two funcs cannot be told apart, and
	// opaque marks the setting as one that cannot agree.
	same func(x, y *config) bool
	// opaque, when not nil, reports whether c's setting holds a function:
	// a later option that makes it conflicts.
	opaque func(c *config) bool
	// text is the setting as the option call that makes it:
	// "scheduler.WithWorkers(2)".
	text func(c *config) string
}

// touched reports whether the later options (applied alone, z, and over
// the first options' config a, b) make the setting: alone they set it,
// or over a they change it (an option that sets a zero value, such as
// WithStats(false) over WithStats(true)).
func (s *optionSetting) touched(a, z, b config) bool {
	return s.set(&z) || !s.same(&b, &a)
}

// notOptionFields returns the fields of config that no option sets, and
// why.
func notOptionFields() map[string]string {
	return map[string]string{
		"teamHook":      "internal tests only",
		"cuda.ordinals": "resolved by New from WithCUDA and PZ_NCUDA",
		"cuda.absent":   "resolved by New from WithCUDA and PZ_NCUDA",
	}
}

// call formats an option call: scheduler.WithWorkers(2).
func call(option string, args ...any) string {
	s := "scheduler." + option + "("
	for i, a := range args {
		if i > 0 {
			s += ", "
		}
		if str, ok := a.(string); ok {
			s += strconv.Quote(str)
		} else {
			s += fmt.Sprint(a)
		}
	}
	return s + ")"
}

// aFunction stands for a function in an option call's text.
const aFunction = "a function"

// funcText is a function's argument in an option call's text.
func funcText(set bool) any {
	if set {
		return rawArg(aFunction)
	}
	return rawArg("nil")
}

// rawArg is an argument that call prints as is, unquoted.
type rawArg string

// String returns r as is.
func (r rawArg) String() string { return string(r) }

// sameIdentity reports whether x and y are the same value: interfaces
// holding pointers agree when the pointers are; a dynamic type that
// cannot be compared is never the same.
func sameIdentity(x, y any) bool {
	if x == nil || y == nil {
		return x == nil && y == nil
	}
	if reflect.TypeOf(x) != reflect.TypeOf(y) || !reflect.ValueOf(x).Comparable() {
		return false
	}
	return x == y
}

// optionSettings returns every setting an Option makes, one entry per
// option; ConflictingOption compares options through it. A new config
// field needs an entry (or a line in notOptionFields):
// TestOptionSettingsCoverConfig fails until it has one.
func optionSettings() []optionSetting {
	return []optionSetting{
		{
			option: "WithPolicy", fields: []string{"policy"},
			set:  func(c *config) bool { return c.policy != "" },
			same: func(x, y *config) bool { return x.policy == y.policy },
			text: func(c *config) string { return call("WithPolicy", c.policy) },
		},
		{
			option: "WithPolicyFunc", fields: []string{"policyImpl"},
			set:    func(c *config) bool { return c.policyImpl != nil },
			same:   func(x, y *config) bool { return (x.policyImpl == nil) == (y.policyImpl == nil) },
			opaque: func(c *config) bool { return c.policyImpl != nil },
			text:   func(c *config) string { return call("WithPolicyFunc", funcText(c.policyImpl != nil)) },
		},
		{
			option: "WithWorkers", fields: []string{"workers", "workersSet"},
			set:  func(c *config) bool { return c.workersSet },
			same: func(x, y *config) bool { return x.workersSet == y.workersSet && x.workers == y.workers },
			text: func(c *config) string { return call("WithWorkers", c.workers) },
		},
		{
			option: "WithPerfModelDir", fields: []string{"modelDir", "modelSet"},
			set:  func(c *config) bool { return c.modelSet },
			same: func(x, y *config) bool { return x.modelSet == y.modelSet && x.modelDir == y.modelDir },
			text: func(c *config) string { return call("WithPerfModelDir", c.modelDir) },
		},
		{
			option: "WithTrace", fields: []string{"trace"},
			set:  func(c *config) bool { return c.trace != "" },
			same: func(x, y *config) bool { return x.trace == y.trace },
			text: func(c *config) string { return call("WithTrace", c.trace) },
		},
		{
			option: "WithStats", fields: []string{"stats"},
			set:  func(c *config) bool { return c.stats },
			same: func(x, y *config) bool { return x.stats == y.stats },
			text: func(c *config) string { return call("WithStats", c.stats) },
		},
		{
			option: "WithGetenv", fields: []string{"getenv"},
			set:    func(c *config) bool { return c.getenv != nil },
			same:   func(x, y *config) bool { return (x.getenv == nil) == (y.getenv == nil) },
			opaque: func(c *config) bool { return c.getenv != nil },
			text:   func(c *config) string { return call("WithGetenv", funcText(c.getenv != nil)) },
		},
		{
			option: "WithSpin", fields: []string{"spin", "spinSet"},
			set:  func(c *config) bool { return c.spinSet },
			same: func(x, y *config) bool { return x.spinSet == y.spinSet && x.spin == y.spin },
			text: func(c *config) string { return call("WithSpin", c.spin) },
		},
		{
			option: "WithDrivenWorkers", fields: []string{"driven"},
			set:  func(c *config) bool { return c.driven != 0 },
			same: func(x, y *config) bool { return x.driven == y.driven },
			text: func(c *config) string { return call("WithDrivenWorkers", c.driven) },
		},
		{
			option: "WithLogger", fields: []string{"logger"},
			set:  func(c *config) bool { return c.logger != nil },
			same: func(x, y *config) bool { return x.logger == y.logger },
			text: func(c *config) string { return call("WithLogger", pointerText(c.logger != nil, "a logger")) },
		},
		{
			option: "WithSimDevices", fields: []string{"sims"},
			set:  func(c *config) bool { return len(c.sims) > 0 },
			same: func(x, y *config) bool { return slices.Equal(x.sims, y.sims) },
			text: func(c *config) string {
				args := make([]any, len(c.sims))
				for i, d := range c.sims {
					args[i] = rawArg(fmt.Sprintf("%+v", d))
				}
				return call("WithSimDevices", args...)
			},
		},
		{
			option: "WithDevices", fields: []string{"devices"},
			set: func(c *config) bool { return len(c.devices) > 0 },
			same: func(x, y *config) bool {
				return slices.EqualFunc(x.devices, y.devices, func(p, q accel.Device) bool { return sameIdentity(p, q) })
			},
			text: func(c *config) string {
				args := make([]any, len(c.devices))
				for i, d := range c.devices {
					args[i] = rawArg(fmt.Sprintf("%T %p", d, d))
				}
				return call("WithDevices", args...)
			},
		},
		{
			option: "WithWorkerLinks", fields: []string{"links"},
			set: func(c *config) bool { return len(c.links) > 0 },
			same: func(x, y *config) bool {
				return maps.EqualFunc(x.links, y.links, func(p, q WorkerLink) bool { return sameIdentity(p, q) })
			},
			text: func(c *config) string {
				return call("WithWorkerLinks", rawArg(fmt.Sprintf("links of workers %v", slices.Sorted(maps.Keys(c.links)))))
			},
		},
		{
			option: "WithWorkerNames", fields: []string{"names"},
			set:  func(c *config) bool { return len(c.names) > 0 },
			same: func(x, y *config) bool { return maps.Equal(x.names, y.names) },
			text: func(c *config) string { return call("WithWorkerNames", rawArg(fmt.Sprint(c.names))) },
		},
		{
			option: "WithWatchdog", fields: []string{"watchdog", "watchdogSet", "watchdogReport"},
			set: func(c *config) bool { return c.watchdogSet },
			same: func(x, y *config) bool {
				return x.watchdogSet == y.watchdogSet && x.watchdog == y.watchdog && (x.watchdogReport == nil) == (y.watchdogReport == nil)
			},
			opaque: func(c *config) bool { return c.watchdogReport != nil },
			text:   func(c *config) string { return call("WithWatchdog", c.watchdog, funcText(c.watchdogReport != nil)) },
		},
		{
			option: "WithCUDA", fields: []string{"cuda.n", "cuda.set"},
			set:  func(c *config) bool { return c.cuda.set },
			same: func(x, y *config) bool { return x.cuda.set == y.cuda.set && x.cuda.n == y.cuda.n },
			text: func(c *config) string { return call("WithCUDA", c.cuda.n) },
		},
		{
			option: "WithCUDAWorkers", fields: []string{"cuda.perGPU"},
			set:  func(c *config) bool { return c.cuda.perGPU != 0 },
			same: func(x, y *config) bool { return x.cuda.perGPU == y.cuda.perGPU },
			text: func(c *config) string { return call("WithCUDAWorkers", c.cuda.perGPU) },
		},
		{
			option: "WithCUDAPipeline", fields: []string{"cuda.pipeline", "cuda.pipelineSet"},
			set: func(c *config) bool { return c.cuda.pipelineSet },
			same: func(x, y *config) bool {
				return x.cuda.pipelineSet == y.cuda.pipelineSet && x.cuda.pipeline == y.cuda.pipeline
			},
			text: func(c *config) string { return call("WithCUDAPipeline", c.cuda.pipeline) },
		},
		{
			option: "WithCUDAPartitions", fields: []string{"cuda.partitions", "cuda.partitionsSet"},
			set: func(c *config) bool { return c.cuda.partitionsSet },
			same: func(x, y *config) bool {
				return x.cuda.partitionsSet == y.cuda.partitionsSet && x.cuda.partitions == y.cuda.partitions
			},
			text: func(c *config) string { return call("WithCUDAPartitions") },
		},
		{
			option: "WithCUDAMemoryLimit", fields: []string{"cuda.memLimit", "cuda.memLimitSet"},
			set: func(c *config) bool { return c.cuda.memLimitSet },
			same: func(x, y *config) bool {
				return x.cuda.memLimitSet == y.cuda.memLimitSet && x.cuda.memLimit == y.cuda.memLimit
			},
			text: func(c *config) string { return call("WithCUDAMemoryLimit", c.cuda.memLimit) },
		},
		{
			option: "WithCUDADriver", fields: []string{"cuda.driver"},
			set:  func(c *config) bool { return c.cuda.driver != nil },
			same: func(x, y *config) bool { return x.cuda.driver == y.cuda.driver },
			text: func(c *config) string { return call("WithCUDADriver", pointerText(c.cuda.driver != nil, "a driver")) },
		},
	}
}

// pointerText is a pointer's argument in an option call's text.
func pointerText(set bool, what string) any {
	if set {
		return rawArg(what)
	}
	return rawArg("nil")
}
