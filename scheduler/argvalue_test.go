package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/pzgo/pz/scheduler"
)

// TestArgValue: an Arg made by WithArg gives its value back, nil included;
// one made by another option gives none.
func TestArgValue(t *testing.T) {
	v, ok := scheduler.WithArg(3).ArgValue()
	assert.True(t, ok)
	assert.Equal(t, 3, v)
	v, ok = scheduler.WithArg(nil).ArgValue()
	assert.True(t, ok)
	assert.Nil(t, v)
	for _, a := range []scheduler.Arg{scheduler.WithPriority(1), scheduler.AfterTags(7), scheduler.Synchronous()} {
		v, ok := a.ArgValue()
		assert.False(t, ok)
		assert.Nil(t, v)
	}
}
