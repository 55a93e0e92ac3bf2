package scheduler

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/hardware/cuda"
)

// fakeDevice is an accel.Device for WithDevices' sample: only its
// identity is compared.
type fakeDevice struct{ accel.Device }

// fakeLink is a WorkerLink for WithWorkerLinks' sample.
type fakeLink struct{ ns float64 }

func (l *fakeLink) Cost(in, out int64) float64 { return l.ns }

// sampleOptions gives, for each entry of optionSettings, an option that
// sets every field the entry covers to a value other than its zero.
func sampleOptions() map[string]Option {
	return map[string]Option{
		"WithPolicy":          WithPolicy("dmda"),
		"WithPolicyFunc":      WithPolicyFunc(func(PolicyConfig) Policy { return nil }),
		"WithWorkers":         WithWorkers(2),
		"WithPerfModelDir":    WithPerfModelDir("models"),
		"WithTrace":           WithTrace("t.json"),
		"WithStats":           WithStats(true),
		"WithGetenv":          WithGetenv(func(string) string { return "" }),
		"WithSpin":            WithSpin(8),
		"WithDrivenWorkers":   WithDrivenWorkers(1),
		"WithLogger":          WithLogger(zap.NewNop()),
		"WithSimDevices":      WithSimDevices(SimDevice{Memory: 1 << 20}),
		"WithDevices":         WithDevices(&fakeDevice{}),
		"WithWorkerLinks":     WithWorkerLinks(map[int]WorkerLink{0: &fakeLink{1}}),
		"WithWorkerNames":     WithWorkerNames(map[int]string{0: "a"}),
		"WithWatchdog":        WithWatchdog(time.Second, func(Stall) {}),
		"WithCUDA":            WithCUDA(1),
		"WithCUDAWorkers":     WithCUDAWorkers(2),
		"WithCUDAPipeline":    WithCUDAPipeline(3),
		"WithCUDAPartitions":  WithCUDAPartitions(),
		"WithCUDAMemoryLimit": WithCUDAMemoryLimit(1 << 30),
		"WithCUDADriver":      WithCUDADriver(&cuda.Driver{}),
	}
}

// configFields lists the fields of a config-like struct type, "cuda.n"
// for a field of a nested struct, and which of them v (of that type)
// holds a non-zero value in.
func configFields(v reflect.Value, prefix string, set map[string]bool) []string {
	var out []string
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name := prefix + f.Name
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == t.PkgPath() {
			out = append(out, configFields(v.Field(i), name+".", set)...)
			continue
		}
		out = append(out, name)
		if set != nil && !v.Field(i).IsZero() {
			set[name] = true
		}
	}
	return out
}

// TestOptionSettingsCoverConfig: every field of config (and of the
// structs of this package it holds, cudaConfig) is covered by exactly
// one entry of optionSettings, or listed in notOptionFields. A field
// added to config without an entry fails here, rather than let
// ConflictingOption agree to options that set it differently.
func TestOptionSettingsCoverConfig(t *testing.T) {
	fields := configFields(reflect.ValueOf(config{}), "", nil)
	require.Contains(t, fields, "cuda.memLimit", "configFields descends into cudaConfig")
	owner := map[string]string{}
	for _, s := range optionSettings() {
		for _, f := range s.fields {
			require.Contains(t, fields, f, "%s covers a field config does not have", s.option)
			require.NotContains(t, owner, f, "%s and %s both cover %s", s.option, owner[f], f)
			owner[f] = s.option
		}
	}
	for f, why := range notOptionFields() {
		require.Contains(t, fields, f, "notOptionFields lists a field config does not have")
		require.NotContains(t, owner, f, "%s is both an option's (%s) and no option's (%s)", f, owner[f], why)
		owner[f] = "none"
	}
	for _, f := range fields {
		if _, ok := owner[f]; !ok {
			t.Errorf("config field %s has no entry in optionSettings (nor a line in notOptionFields): ConflictingOption would not compare it", f)
		}
	}
	require.Len(t, owner, len(fields))
}

// TestOptionSettingsMatchOptions: each entry's option sets exactly the
// fields the entry covers, the entry's set sees it, and same tells it
// from a zero config; its text names the option.
func TestOptionSettingsMatchOptions(t *testing.T) {
	samples := sampleOptions()
	for _, s := range optionSettings() {
		o, ok := samples[s.option]
		require.True(t, ok, "no sample option for %s", s.option)
		c := applied(config{}, []Option{o})
		set := map[string]bool{}
		configFields(reflect.ValueOf(c), "", set)
		got := make([]string, 0, len(set))
		for f := range set {
			got = append(got, f)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(s.fields))
		require.Equal(t, want, got, "the fields %s sets", s.option)
		zero := config{}
		require.True(t, s.set(&c), "%s: set", s.option)
		require.False(t, s.set(&zero), "%s: set on a zero config", s.option)
		require.False(t, s.same(&c, &zero), "%s: same as a zero config", s.option)
		require.True(t, s.same(&c, &c), "%s: same as itself", s.option)
		require.Contains(t, s.text(&c), "scheduler."+s.option+"(")
		if s.opaque != nil && s.opaque(&c) {
			require.ErrorIs(t, ConflictingOption([]Option{o}, []Option{o}), ErrBadOption, "%s holds a function", s.option)
			continue
		}
		require.NoError(t, ConflictingOption([]Option{o}, []Option{o}), s.option)
		if s.option != "WithSimDevices" && s.option != "WithDevices" { // these add devices: twice is twice as many
			require.NoError(t, ConflictingOption([]Option{o}, []Option{o, o}), "%s given twice", s.option)
		}
	}
	require.Len(t, samples, len(optionSettings()), "a sample for an option the table does not have")
}
