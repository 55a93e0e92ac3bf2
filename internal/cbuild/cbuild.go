// Package cbuild compiles the C stand-in libraries that tests load in
// place of vendor libraries (internal/fakecuda's driver, cuBLAS and
// cuSOLVER; internal/fakenvml's NVML) with the system's C compiler, and
// caches each build by its source, flags and compiler, so that a test
// binary compiles a library once and later runs reuse it.
package cbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// A Library is a C source compiled into a shared library.
type Library struct {
	// Name is the file name of the library, e.g. "libfakecuda.so".
	Name string
	// What names it in errors ("the stand-in CUDA driver").
	What string
	// Cache is the name of the cache directory under os.TempDir, to
	// which the user id is appended ("pz-fakecuda").
	Cache string
	// Source is the C source.
	Source []byte
	// Flags go after the compiler command and before the output: the
	// language, optimization, -fPIC -shared, warnings.
	Flags []string
}

// Compiler returns the command that runs the C compiler: $CC split on
// spaces, or cc; an error when it is not found.
func Compiler() ([]string, error) {
	cmd := strings.Fields(os.Getenv("CC"))
	if len(cmd) == 0 {
		cmd = []string{"cc"}
	}
	path, err := exec.LookPath(cmd[0])
	if err != nil {
		return nil, err
	}
	return append([]string{path}, cmd[1:]...), nil
}

// Build compiles l with the compiler command cc and the extra flags defs
// into the cache, unless the same build is there already, and returns
// the library's path. Concurrent builds, from this process or others,
// each compile into a temporary file and rename it into place.
func (l *Library) Build(cc, defs []string) (string, error) {
	flags := append(append([]string{}, l.Flags...), defs...)
	h := sha256.New()
	for _, s := range append(append([]string{runtime.GOOS, runtime.GOARCH}, cc...), flags...) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write(l.Source)
	dir, err := l.cacheDir()
	if err != nil {
		return "", err
	}
	key := hex.EncodeToString(h.Sum(nil)[:12])
	path := filepath.Join(dir, key, l.Name)
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), l.Name+".tmp*")
	if err != nil {
		return "", err
	}
	_ = tmp.Close()
	defer func() { _ = os.Remove(tmp.Name()) }()
	args := append(append(append([]string{}, cc[1:]...), flags...), "-o", tmp.Name(), "-x", "c", "-")
	cmd := exec.Command(cc[0], args...)
	cmd.Stdin = strings.NewReader(string(l.Source))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("compiling %s: %s %s: %w\n%s", l.What, cc[0], strings.Join(args, " "), err, out)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	return path, nil
}

// cacheDir returns this user's cache directory under os.TempDir,
// creating it. A directory someone else owns or may write to is refused:
// the library found there is loaded into the test process.
func (l *Library) cacheDir() (string, error) {
	dir := filepath.Join(os.TempDir(), l.Cache+"-"+strconv.Itoa(os.Getuid()))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 || !ok || int(st.Uid) != os.Getuid() {
		return "", fmt.Errorf("refusing the cache directory %s: not a directory of this user's that only this user can write to", dir)
	}
	return dir, nil
}
