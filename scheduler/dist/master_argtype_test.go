package dist_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// Celsius is a named basic type of task argument.
type Celsius float64

// argInner and argParams are a registered struct argument with nested
// fields.
type argInner struct {
	A []int
	M map[string]float32
}

type argParams struct {
	Name string
	N    int
	In   argInner
	P    *argInner
	Cs   []Celsius
}

// argUnregistered is a struct no rank registers.
type argUnregistered struct{ X int }

// argCase is a task argument and its check by a type assertion to its Go
// type inside the codelet.
type argCase struct {
	name  string
	arg   any
	check func(a any) error
}

// asserted checks, in a codelet, that a is want's Go type (a.(T)) and
// value.
func asserted[T any](want T) func(any) error {
	return func(a any) error {
		got, ok := a.(T)
		if !ok {
			return fmt.Errorf("argument %T %#v, want a %T", a, a, want)
		}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("argument %#v, want %#v", got, want)
		}
		return nil
	}
}

func argCases() []argCase {
	seven := 7
	inner := argInner{A: []int{1, -2}, M: map[string]float32{"x": 1.5}}
	params := argParams{Name: "p", N: -3, In: inner, P: &argInner{A: []int{9}}, Cs: []Celsius{-40, 36.6}}
	c := func(name string, arg any, check func(any) error) argCase { return argCase{name, arg, check} }
	return []argCase{
		c("bool", true, asserted(true)),
		c("int", -5, asserted(-5)),
		c("int8", int8(math.MinInt8), asserted(int8(math.MinInt8))),
		c("int16", int16(-300), asserted(int16(-300))),
		c("int32", int32(math.MaxInt32), asserted(int32(math.MaxInt32))),
		c("int64", int64(math.MinInt64), asserted(int64(math.MinInt64))),
		c("uint", uint(5), asserted(uint(5))),
		c("uint8", uint8(255), asserted(uint8(255))),
		c("uint16", uint16(65535), asserted(uint16(65535))),
		c("uint32", uint32(1<<31), asserted(uint32(1<<31))),
		c("uint64", uint64(math.MaxUint64), asserted(uint64(math.MaxUint64))),
		c("float32", float32(1.25), asserted(float32(1.25))),
		c("float64", 2.5, asserted(2.5)),
		c("complex64", complex64(1+2i), asserted(complex64(1+2i))),
		c("complex128", 3-4i, asserted(3-4i)),
		c("string", "héllo", asserted("héllo")),
		c("[]int", []int{1, 2, 3}, asserted([]int{1, 2, 3})),
		c("[]int64", []int64{-1, 1 << 40}, asserted([]int64{-1, 1 << 40})),
		c("[]float32", []float32{0.5}, asserted([]float32{0.5})),
		c("[][]string", [][]string{{"a"}, {}}, asserted([][]string{{"a"}, {}})),
		c("[3]int16", [3]int16{1, -2, 3}, asserted([3]int16{1, -2, 3})),
		c("[2][]uint8", [2][]uint8{{1}, {2, 3}}, asserted([2][]uint8{{1}, {2, 3}})),
		c("map[string]int", map[string]int{"a": 1}, asserted(map[string]int{"a": 1})),
		c("map[int][]float32", map[int][]float32{-1: {2}}, asserted(map[int][]float32{-1: {2}})),
		c("map[string]any", map[string]any{"s": "x"}, asserted(map[string]any{"s": "x"})),
		c("*int", &seven, asserted(&seven)),
		c("nil *int", (*int)(nil), asserted((*int)(nil))),
		c("Celsius", Celsius(-40), asserted(Celsius(-40))),
		c("[]Celsius", []Celsius{1, 2}, asserted([]Celsius{1, 2})),
		c("struct", params, asserted(params)),
		c("*struct", &params, asserted(&params)),
		c("map[string]struct", map[string]argInner{"i": inner}, asserted(map[string]argInner{"i": inner})),
		c("nil", nil, func(a any) error {
			if a != nil {
				return fmt.Errorf("argument %T %#v, want nil", a, a)
			}
			return nil
		}),
	}
}

// argRegistry returns a registry of one codelet per case, which counts
// its runs in ran, and, with types, the cases' named types.
func argRegistry(cases []argCase, ran *atomic.Int64, types bool) (*dist.Registry, []*scheduler.Codelet, error) {
	var cls []*scheduler.Codelet
	for _, ac := range cases {
		cls = append(cls, &scheduler.Codelet{Name: "arg." + ac.name, CPU: func(c *scheduler.Call) error {
			ran.Add(1)
			return ac.check(c.Arg)
		}})
	}
	reg, err := dist.NewRegistry(cls...)
	if err != nil {
		return nil, nil, err
	}
	if types {
		err = reg.RegisterArgTypes(Celsius(0), argParams{}, reflect.TypeFor[argInner]())
	}
	return reg, cls, err
}

// runArgCases submits every case to rank 1's workers and, on the master,
// an argument of an unregistered struct, which Submit refuses naming it.
func runArgCases(ctx context.Context, c comm.Comm, ran []atomic.Int64) error {
	cases := argCases()
	reg, cls, err := argRegistry(cases, &ran[c.Rank()], true)
	if err != nil {
		return err
	}
	return dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
		var remote []int
		for w := range m.Workers() {
			if m.RankOf(w) == 1 {
				remote = append(remote, w)
			}
		}
		on1, err := m.Local().NewContext("rank 1", scheduler.ContextWorkers(remote...))
		if err != nil {
			return err
		}
		for i, ac := range cases {
			if err := m.Submit(ctx, cls[i], scheduler.WithArg(ac.arg), scheduler.InContext(on1)); err != nil {
				return fmt.Errorf("case %s: %w", ac.name, err)
			}
		}
		err = m.Submit(ctx, cls[0], scheduler.WithArg(argUnregistered{1}), scheduler.InContext(on1))
		if !errors.Is(err, comm.ErrInvalidArg) {
			return fmt.Errorf("an unregistered struct argument: Submit returned %v, want an error wrapping comm.ErrInvalidArg", err)
		}
		for _, want := range []string{"dist_test.argUnregistered", "RegisterArgTypes"} {
			if !strings.Contains(err.Error(), want) {
				return fmt.Errorf("an unregistered struct argument: Submit's error %q does not name %q", err, want)
			}
		}
		return m.WaitAll(ctx)
	})
}

// TestMasterArgTypes: a task argument arrives on a worker rank with the
// Go type given to WithArg (basic kinds, composites of them, registered
// named types, nil), each asserted with c.Arg.(T) in a codelet that runs
// on rank 1; an argument of an unregistered struct is refused at Submit.
func TestMasterArgTypes(t *testing.T) {
	runCasesOnTwoRanks(t, runArgCases, len(argCases()))
}

// runCasesOnTwoRanks runs run (runArgCases or runIfaceCases) on two
// in-process ranks and checks that its n tasks ran on rank 1 and none on
// the master's cores.
func runCasesOnTwoRanks(t *testing.T, run func(context.Context, comm.Comm, []atomic.Int64) error, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ran := make([]atomic.Int64, 2)
	require.NoError(t, local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		return run(ctx, c, ran)
	}))
	for rank := range ran {
		checkCasesRan(t, ran, rank, n)
	}
}

// checkCasesRan checks what rank's cores ran of n cases' tasks: rank 1
// all n, rank 0 (the master) none.
func checkCasesRan(t *testing.T, ran []atomic.Int64, rank, n int) {
	t.Helper()
	if rank == 1 {
		assert.Equal(t, int64(n), ran[1].Load(), "tasks run on rank 1")
	} else {
		assert.Equal(t, int64(0), ran[0].Load(), "tasks ran on the master's cores")
	}
}

// A named type registered on the master only is refused at Submit,
// naming the ranks without it.
func TestMasterArgTypeMissingOnRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var ran atomic.Int64
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		reg, cls, err := argRegistry(argCases()[:1], &ran, c.Rank() == 0)
		if err != nil {
			return err
		}
		return dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
			err := m.Submit(ctx, cls[0], scheduler.WithArg([]Celsius{1}))
			if err == nil {
				return errors.New("Submit took an argument of a type rank 1 did not register")
			}
			return err
		})
	})
	require.ErrorIs(t, err, comm.ErrInvalidArg)
	assert.ErrorContains(t, err, "ranks [1] have not registered github.com/pzgo/pz/scheduler/dist_test.Celsius")
}

// RegisterArgTypes refuses what needs or takes no registration.
func TestRegisterArgTypesBadInput(t *testing.T) {
	reg, err := dist.NewRegistry()
	require.NoError(t, err)
	for _, x := range []any{nil, 1, []int{}, struct{ X int }{}} {
		err := reg.RegisterArgTypes(x)
		assert.ErrorIs(t, err, comm.ErrInvalidArg, "%T", x)
	}
	require.NoError(t, reg.RegisterArgTypes(argInner{}, argInner{}))
	assert.NoError(t, reg.RegisterArgTypes(reflect.TypeFor[Celsius]()))
	require.NoError(t, reg.RegisterArgTypes(argParams{}))
	type argParams struct{ Y int } // another type of the package-level type's name
	assert.ErrorContains(t, reg.RegisterArgTypes(argParams{}), `two types named "github.com/pzgo/pz/scheduler/dist_test.argParams"`)
}
