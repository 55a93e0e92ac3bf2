//go:build !amd64

package spin

// Pause does nothing where there is no PAUSE instruction to call.
func Pause() {}
