package scheduler_test

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/pzgo/pz/scheduler"
)

// Recursive tasks, where OpenMP would write a taskwait: a task's code may
// submit tasks but not wait for them (ErrInTask). A task that splits
// submits its children, each carrying a new tag, and a continuation
// that waits for those tags (AfterTags) and carries the tag its own
// parent waits for; the continuation combines the results and removes
// its children's tags, which the scheduler would otherwise remember.
// The program waits, outside the tasks, for the root's tag.
func Example_recursive() {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""))
	if err != nil {
		panic(err)
	}
	defer s.Close()

	var lastTag atomic.Uint64 // a new tag for every join
	newTag := func() scheduler.Tag { return scheduler.Tag(lastTag.Add(1)) }
	type fibArg struct {
		n   int
		out *int
		tag scheduler.Tag // carried by the task that completes fib(n)
	}
	type sumArg struct {
		x, y, out *int
		tags      []scheduler.Tag // the children's, removed once waited for
	}
	sum := &scheduler.Codelet{Name: "sum", CPU: func(c *scheduler.Call) error {
		a := c.Arg.(sumArg)
		*a.out = *a.x + *a.y
		return s.RemoveTags(a.tags...)
	}}
	leaf := &scheduler.Codelet{Name: "leaf", CPU: func(c *scheduler.Call) error {
		a := c.Arg.(fibArg)
		*a.out = a.n
		return nil
	}}
	// spawn submits the work of fib(n); the task that ends it carries
	// tag: a leaf itself, else the continuation of the task that splits
	// (which carries no tag: one pending task at a time carries a tag,
	// and it is still running when it submits its continuation).
	var fib *scheduler.Codelet
	spawn := func(a fibArg) error {
		if a.n < 2 {
			return s.Submit(ctx, leaf, scheduler.WithArg(a), scheduler.WithTag(a.tag))
		}
		return s.Submit(ctx, fib, scheduler.WithArg(a))
	}
	fib = &scheduler.Codelet{Name: "fib", CPU: func(c *scheduler.Call) error {
		a := c.Arg.(fibArg)
		x, y := new(int), new(int)
		tx, ty := newTag(), newTag()
		if err := spawn(fibArg{a.n - 1, x, tx}); err != nil {
			return err
		}
		if err := spawn(fibArg{a.n - 2, y, ty}); err != nil {
			return err
		}
		return s.Submit(ctx, sum, scheduler.WithArg(sumArg{x, y, a.out, []scheduler.Tag{tx, ty}}),
			scheduler.AfterTags(tx, ty), scheduler.WithTag(a.tag))
	}}
	var r int
	root := newTag()
	if err := spawn(fibArg{20, &r, root}); err != nil {
		panic(err)
	}
	if err := s.WaitTag(ctx, root); err != nil {
		panic(err)
	}
	fmt.Println("fib(20) =", r)
	// Output: fib(20) = 6765
}
