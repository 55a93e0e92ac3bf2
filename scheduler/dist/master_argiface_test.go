package dist_test

import (
	"context"
	"errors"
	"fmt"
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

// argShape is an interface type of task argument fields; argCircle and
// *argSquare implement it, argHexagon too but no rank registers it.
type argShape interface{ Area() float64 }

type argCircle struct{ R float64 }

func (c argCircle) Area() float64 { return 3 * c.R * c.R }

type argSquare struct{ S float64 }

func (s *argSquare) Area() float64 { return s.S * s.S }

type argHexagon struct{ S float64 }

func (h argHexagon) Area() float64 { return 2.598 * h.S * h.S }

// argJob holds interface values in fields.
type argJob struct {
	Shape argShape
	Any   any
	Name  string
	hide  int // unexported: does not travel
}

// argOuter nests them.
type argOuter struct {
	Job    argJob
	P      *argJob
	Shapes []argShape
	ByKey  map[any]argShape
	Fixed  [2]any
	Cs     []Celsius
}

// ifaceCases are task arguments that hold interface values, each
// checked in a codelet on rank 1 by a type assertion to its Go type and
// by calling the interface's method.
func ifaceCases() []argCase {
	job := argJob{Shape: argCircle{2}, Any: 7, Name: "j"}
	outer := argOuter{
		Job:    argJob{Shape: &argSquare{3}, Any: []any{int8(-1), "x", float32(0.5), nil, argCircle{1}}},
		P:      &argJob{Any: argJob{Shape: argCircle{4}}},
		Shapes: []argShape{argCircle{1}, nil, &argSquare{2}},
		ByKey:  map[any]argShape{"c": argCircle{5}, 3: &argSquare{1}, Celsius(1): nil},
		Fixed:  [2]any{uint16(9), map[string]any{"z": complex64(1i)}},
		Cs:     []Celsius{1},
	}
	c := func(name string, arg any, check func(any) error) argCase { return argCase{name, arg, check} }
	area := func(want float64) func(any) error {
		return func(a any) error {
			j, ok := a.(argJob)
			if !ok {
				return fmt.Errorf("argument %T, want an argJob", a)
			}
			if got := j.Shape.Area(); got != want {
				return fmt.Errorf("Shape.Area() = %v, want %v", got, want)
			}
			return asserted(argJob{Shape: argCircle{2}, Any: 7, Name: "j"})(a)
		}
	}
	return []argCase{
		c("iface.field", job, area(12)),
		c("iface.nil", argJob{Name: "n", hide: 1}, asserted(argJob{Name: "n"})),
		c("iface.*struct", &job, asserted(&argJob{Shape: argCircle{2}, Any: 7, Name: "j"})),
		c("iface.nested", outer, asserted(outer)),
		c("iface.[]Shape", []argShape{&argSquare{2}, argCircle{1}, nil}, asserted([]argShape{&argSquare{2}, argCircle{1}, nil})),
		c("iface.map[string]any", map[string]any{"n": 7, "f": float32(1.5), "c": argCircle{3}, "l": []any{}, "nil": []int(nil), "m": map[string]int{"a": 1}},
			asserted(map[string]any{"n": 7, "f": float32(1.5), "c": argCircle{3}, "l": []any{}, "nil": []int(nil), "m": map[string]int{"a": 1}})),
		c("iface.[]any", []any{uint(1), Celsius(2), &argCircle{3}, [2]int{4, 5}}, asserted([]any{uint(1), Celsius(2), &argCircle{3}, [2]int{4, 5}})),
		c("iface.nil []any", []any(nil), asserted([]any(nil))),
	}
}

// ifaceRegistry returns a registry of one codelet per case of
// ifaceCases, which counts its runs in ran, and, with types, registers
// the types the cases use.
func ifaceRegistry(ran *atomic.Int64, types bool) (*dist.Registry, []*scheduler.Codelet, error) {
	var cls []*scheduler.Codelet
	for _, ac := range ifaceCases() {
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
		err = reg.RegisterArgTypes(argJob{}, argOuter{}, argCircle{}, argSquare{}, Celsius(0), reflect.TypeFor[argShape]())
	}
	return reg, cls, err
}

// onRank1 returns a context of m's scheduler whose workers are rank
// 1's, so that its tasks run there.
func onRank1(m *dist.Master) (*scheduler.Context, error) {
	var remote []int
	for w := range m.Workers() {
		if m.RankOf(w) == 1 {
			remote = append(remote, w)
		}
	}
	return m.Local().NewContext("rank 1", scheduler.ContextWorkers(remote...))
}

// refusedArg checks that Submit refused arg wrapping comm.ErrInvalidArg
// with an error that names each of want.
func refusedArg(ctx context.Context, m *dist.Master, cl *scheduler.Codelet, arg any, want ...string) error {
	err := m.Submit(ctx, cl, scheduler.WithArg(arg))
	if !errors.Is(err, comm.ErrInvalidArg) {
		return fmt.Errorf("argument %#v: Submit returned %v, want an error wrapping comm.ErrInvalidArg", arg, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			return fmt.Errorf("argument %#v: Submit's error %q does not name %q", arg, err, w)
		}
	}
	return nil
}

// runIfaceCases submits every case of ifaceCases to rank 1's workers
// and, on the master, arguments that hold a value of a type that cannot
// cross ranks, which Submit refuses naming the field and the type.
func runIfaceCases(ctx context.Context, c comm.Comm, ran []atomic.Int64) error {
	reg, cls, err := ifaceRegistry(&ran[c.Rank()], true)
	if err != nil {
		return err
	}
	return dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
		on1, err := onRank1(m)
		if err != nil {
			return err
		}
		for i, ac := range ifaceCases() {
			if err := m.Submit(ctx, cls[i], scheduler.WithArg(ac.arg), scheduler.InContext(on1)); err != nil {
				return fmt.Errorf("case %s: %w", ac.name, err)
			}
		}
		for _, bad := range []struct {
			arg  any
			want []string
		}{
			{argJob{Shape: argHexagon{1}}, []string{"dist_test.argJob.Shape", "dist_test.argHexagon", "RegisterArgTypes"}},
			{argOuter{Shapes: []argShape{argCircle{1}, argHexagon{1}}}, []string{"dist_test.argOuter.Shapes[1]", "dist_test.argHexagon"}},
			{argOuter{P: &argJob{Any: argJob{Any: argHexagon{}}}}, []string{"dist_test.argOuter.P.Any.Any", "dist_test.argHexagon"}},
			{map[string]any{"k": struct{ X int }{1}}, []string{`argument["k"]`, "struct { X int }", "unnamed struct"}},
			{[]any{func() {}}, []string{"argument[0]", "func()"}},
		} {
			if err := refusedArg(ctx, m, cls[0], bad.arg, bad.want...); err != nil {
				return err
			}
		}
		return m.WaitAll(ctx)
	})
}

// TestMasterArgInterfaces: a task argument that holds interface values
// (struct fields of an interface type, []any, map[any]Shape, nested)
// arrives on a worker rank with the dynamic Go type of each (registered
// named types, predeclared types and composites of them) and the
// interface's methods callable; one that holds a value of an
// unregistered type is refused at Submit, naming the field and the type.
func TestMasterArgInterfaces(t *testing.T) {
	runCasesOnTwoRanks(t, runIfaceCases, len(ifaceCases()))
}

// A type registered on the master only, inside an interface field, is
// refused at Submit, naming the ranks without it.
func TestMasterArgInterfaceMissingOnRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var ran atomic.Int64
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		reg, cls, err := ifaceRegistry(&ran, false)
		if err != nil {
			return err
		}
		types := []any{argJob{}}
		if c.Rank() == 0 {
			types = append(types, argCircle{})
		}
		if err := reg.RegisterArgTypes(types...); err != nil {
			return err
		}
		return dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
			err := m.Submit(ctx, cls[0], scheduler.WithArg(argJob{Shape: argCircle{1}}))
			if err == nil {
				return errors.New("Submit took an argument holding a type rank 1 did not register")
			}
			return err
		})
	})
	require.ErrorIs(t, err, comm.ErrInvalidArg)
	assert.ErrorContains(t, err, "dist_test.argJob.Shape holds a dist_test.argCircle")
	assert.ErrorContains(t, err, "ranks [1] have not registered github.com/pzgo/pz/scheduler/dist_test.argCircle")
	assert.Zero(t, ran.Load(), "no task ran")
}
