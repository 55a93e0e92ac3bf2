package logger

import (
	"io/fs"
	"os"
	"syscall"
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

// The causes a test running as root cannot provoke (root may write a
// read-only directory) are still explained, each with its fix.
func TestOpenErrorExplainsPermissions(t *testing.T) {
	for _, tc := range []struct {
		err     error
		mention string
	}{
		{syscall.EACCES, "may not write it (is /data/ro, or the file, read-only?)"},
		{syscall.EROFS, "/data/ro is on a read-only file system: name a file on a writable one"},
		{syscall.EMFILE, "name a file this process can create or append to"},
	} {
		err := openError(3, "/data/ro/pz-3.log", `PZ_LOG_FILE="/data/ro/pz-{rank}.log"`,
			&fs.PathError{Op: "open", Path: "/data/ro/pz-3.log", Err: tc.err})
		assert.ErrorIs(t, err, tc.err)
		assert.Contains(t, err.Error(), `logger: rank 3: cannot open the log file /data/ro/pz-3.log (from PZ_LOG_FILE="/data/ro/pz-{rank}.log")`)
		assert.Contains(t, err.Error(), tc.mention)
	}
}
