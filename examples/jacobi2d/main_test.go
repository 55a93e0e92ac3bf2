package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pzgo/pz/runtimeview"
)

// TestRanks runs the example with its default flags on 1 to 4 in-process
// ranks; run checks the plate and the residuals on rank 0.
func TestRanks(t *testing.T) {
	for _, ranks := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprint(ranks), func(t *testing.T) {
			if err := runtimeview.RunLocal(t.Context(), ranks, run); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCheckFlags: -every 0 divided by zero in every rank (a panic),
// -every -1 computed the residual at every step, and -steps -1 ran and
// printed "-1 steps ... matches the sequential run".
func TestCheckFlags(t *testing.T) {
	for _, c := range []struct {
		rows, cols, b, steps, every int
		want                        string // in the error; "" for none
	}{
		{128, 192, 32, 30, 10, ""},
		{100, 150, 32, 0, 10, ""},
		{128, 192, 32, 30, 0, "-every 0"},
		{128, 192, 32, 30, -1, "-every -1"},
		{128, 192, 32, -1, 10, "-steps -1"},
		{0, 192, 32, 30, 10, "at least 1"},
		{128, 192, 0, 30, 10, "at least 1"},
	} {
		err := checkFlags(c.rows, c.cols, c.b, c.steps, c.every)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want an error saying %q", c, err, c.want)
		}
	}
}
