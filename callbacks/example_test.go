package callbacks_test

import (
	"errors"
	"fmt"

	"github.com/pzgo/pz/callbacks"
)

func Example() {
	s := callbacks.New()
	_ = s.Push(func() error { fmt.Println("finalize MPI"); return nil })
	_ = s.Push(func() error { fmt.Println("finalize solver"); return errors.New("solver: flush failed") })
	_ = s.Push(func() error { fmt.Println("close output file"); return nil })

	err := s.Close() // newest first; a failure does not stop the rest
	fmt.Println("error:", err)
	fmt.Println("again:", s.Close() == err) // idempotent
	fmt.Println("push after close:", s.Push(func() error { return nil }))
	// Output:
	// close output file
	// finalize solver
	// finalize MPI
	// error: callbacks: callback 1: solver: flush failed
	// again: true
	// push after close: callbacks: stack closed: Push (callback 3) came after Close began, so the callback was not stacked and will never run; stack finalizers before Close (a callback that Close is running cannot stack more: do that work in it directly)
}
