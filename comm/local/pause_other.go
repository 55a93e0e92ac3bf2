//go:build !amd64

package local

// pause does nothing where there is no PAUSE instruction to call.
func pause() {}
