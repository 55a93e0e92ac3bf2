//go:build cblas

package linalg

import "testing"

func TestOpenBLASSerial(t *testing.T) {
	if got := blasThreads(); got != 1 {
		t.Fatalf("OpenBLAS uses %d threads per call, want 1", got)
	}
}
