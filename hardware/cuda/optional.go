package cuda

import "fmt"

// unsupported is the error of a method whose entry point, named call,
// the loaded driver lacks (its api field is nil: bind skips missing
// optional symbols). It wraps ErrNotSupported.
func (d *Driver) unsupported(call string) error {
	return fmt.Errorf("%w: %s lacks %s (driver version %d)", ErrNotSupported, d.path, call, d.version)
}
