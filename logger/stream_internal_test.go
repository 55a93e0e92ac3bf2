package logger

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Syncing standard error is not an error when it is a pipe (as under
// mpirun, or `prog 2>&1 | tee`), where os.File.Sync fails with EINVAL; a
// real failure (a closed file) still is.
func TestStreamSyncOnPipe(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	require.Error(t, w.Sync(), "the premise: syncing a pipe fails")
	assert.NoError(t, stream{w}.Sync())
	require.NoError(t, w.Close())
	assert.Error(t, stream{w}.Sync(), "a closed file")
}
