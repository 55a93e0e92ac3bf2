package peerdir

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFind(t *testing.T) {
	top := t.TempDir()
	mod := filepath.Join(top, "main")
	require.NoError(t, os.MkdirAll(filepath.Join(mod, "cmd", "x"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module m\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(top, "shared", "peers", "mpi"), 0o755))

	t.Chdir(filepath.Join(mod, "cmd", "x"))
	got := Find("mpi")
	want, err := filepath.EvalSymlinks(filepath.Join(top, "shared", "peers", "mpi"))
	require.NoError(t, err)
	gotReal, err := filepath.EvalSymlinks(got)
	require.NoError(t, err)
	assert.Equal(t, want, gotReal)
	assert.Empty(t, From(filepath.Join(mod, "cmd", "x"), "starpu"), "a peer that is not there")

	assert.Empty(t, From(top, "mpi"), "no go.mod above")

	// From a folder outside any module, Find falls back to the checkout
	// of this package's source (none in a checkout without ../shared).
	_, file, _, _ := runtime.Caller(0)
	fallback := From(filepath.Dir(file), "mpi")
	t.Chdir(top)
	assert.Equal(t, fallback, Find("mpi"))
}
