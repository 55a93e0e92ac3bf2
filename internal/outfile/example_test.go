package outfile_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/pzgo/pz/internal/outfile"
)

// Write a file in one call, then read it back.
func ExampleWrite() {
	path := filepath.Join(os.TempDir(), "outfile-example.txt")
	defer os.Remove(path)
	err := outfile.Write(path, func(w io.Writer) error {
		_, err := fmt.Fprintln(w, "hello")
		return err
	})
	b, _ := os.ReadFile(path)
	fmt.Printf("%q %v\n", b, err)
	err = outfile.Write(filepath.Join(path, "not-a-dir", "x"), func(io.Writer) error { return nil })
	fmt.Println(err != nil)
	// Output:
	// "hello\n" <nil>
	// true
}
