//go:build mpi

package mpi

/*
#include <stdint.h>
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

// pzUserCombine is the Go side of pz_user_fn (userop.c): it runs the user
// function of the call whose handle h the datatype carried. This file
// holds only the export (a file with //export may declare C, not define
// it).
//
//export pzUserCombine
func pzUserCombine(h C.uintptr_t, in, inout unsafe.Pointer, n C.int) {
	u := cgo.Handle(h).Value().(*userCall)
	if u.panic != nil {
		return // fn panicked: MPI finishes the collective, the ranks then agree that the result is void (runUserAgreed)
	}
	defer func() {
		// A panic must not unwind through MPI's C frames.
		if p := recover(); p != nil {
			u.panic = p
		}
	}()
	bytes := int(n) * u.size
	u.fn(unsafe.Slice((*byte)(in), bytes), unsafe.Slice((*byte)(inout), bytes))
}
