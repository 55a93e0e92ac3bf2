package cuda

import "golang.org/x/sys/unix"

// threadID returns the id of the calling goroutine's OS thread (gettid).
// The executor compares it with its own to tell whether a caller is the
// executor goroutine: a goroutine locked to a thread is the only one that
// runs on it. thread_other.go is the counterpart for other systems.
func threadID() int {
	return unix.Gettid()
}
