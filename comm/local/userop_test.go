package local_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// A user op that panics is a panic of the rank that ran it (recovered by
// Run as a *comm.PanicError); the other ranks are not left waiting.
func TestUserOpPanics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	boom := comm.UserOp("boom", func(in, inout []int32) { panic("boom") }, true)
	err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
		_, err := comm.AllReduceUser(ctx, c, []int32{1, 2, 3}, boom)
		return err
	})
	var pe *comm.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("Run returned %v, want a *comm.PanicError", err)
	}
}
