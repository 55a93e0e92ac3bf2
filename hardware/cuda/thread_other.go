//go:build !linux

package cuda

import (
	"bytes"
	"runtime"
	"strconv"
)

// threadID identifies the calling goroutine where pz reads no OS thread
// id (macOS, the BSDs, Windows; CUDA exists on none of them that pz
// targets, so only the executor's own tests run it there). The executor
// asks only whether a caller is the executor goroutine, and the
// goroutine's id answers that as the Linux thread id does: the executor
// goroutine stays locked to its thread for its whole life. The id is
// parsed from the first line of runtime.Stack, "goroutine 18 [running]:",
// which costs about a microsecond; it is 0 if that line ever changes
// shape, which would make onThread report false.
func threadID() int {
	var buf [64]byte
	line := buf[:runtime.Stack(buf[:], false)]
	line, _ = bytes.CutPrefix(line, []byte("goroutine "))
	if i := bytes.IndexByte(line, ' '); i > 0 {
		line = line[:i]
	}
	id, err := strconv.Atoi(string(line))
	if err != nil {
		return 0
	}
	return id
}
