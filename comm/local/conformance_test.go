package local_test

import (
	"fmt"
	"testing"

	"github.com/pzgo/pz/comm/commtest"
	"github.com/pzgo/pz/comm/local"
)

func TestConformance(t *testing.T) {
	for n := 1; n <= 4; n++ {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			commtest.RunGroup(t, n, local.Run)
		})
	}
}
