package cbuild_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/internal/cbuild"
)

// TestBuildCaches: the same build is compiled once; other flags or
// source make another library; a compile error names the library.
func TestBuildCaches(t *testing.T) {
	cc, err := cbuild.Compiler()
	if err != nil {
		t.Skipf("no C compiler: %v", err)
	}
	t.Setenv("TMPDIR", t.TempDir())
	lib := cbuild.Library{Name: "libt.so", What: "the test library", Cache: "pz-cbuild-test",
		Source: []byte("int f(void) { return 1; }\n"), Flags: []string{"-fPIC", "-shared"}}
	p1, err := lib.Build(cc, nil)
	require.NoError(t, err)
	fi1, err := os.Stat(p1)
	require.NoError(t, err)
	p2, err := lib.Build(cc, nil)
	require.NoError(t, err)
	require.Equal(t, p1, p2)
	fi2, err := os.Stat(p2)
	require.NoError(t, err)
	require.Equal(t, fi1.ModTime(), fi2.ModTime(), "not compiled again")
	p3, err := lib.Build(cc, []string{"-DX=1"})
	require.NoError(t, err)
	require.NotEqual(t, p1, p3)

	bad := lib
	bad.Source = []byte("int f(void) { return }\n")
	_, err = bad.Build(cc, nil)
	require.ErrorContains(t, err, "compiling the test library")
}
