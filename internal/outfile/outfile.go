// Package outfile writes an output file through a buffer, in one call.
package outfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
)

// Write creates path and writes it with fn through a buffer; the error
// names the file, whether creating, writing, flushing or closing failed.
func Write(path string, fn func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	err = fn(bw)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
