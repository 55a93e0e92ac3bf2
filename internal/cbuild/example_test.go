package cbuild_test

import (
	"fmt"

	"github.com/ebitengine/purego"

	"github.com/pzgo/pz/internal/cbuild"
)

// Compile a C function into a cached shared library, load it and call
// it (the machine needs a C compiler: cc, or $CC).
func Example() {
	lib := cbuild.Library{
		Name: "libanswer.so", What: "the example library", Cache: "pz-cbuild-example",
		Source: []byte("int answer(int x) { return 2 * x; }\n"),
		Flags:  []string{"-O2", "-fPIC", "-shared"},
	}
	cc, err := cbuild.Compiler()
	if err != nil {
		fmt.Println("no C compiler:", err)
		return
	}
	path, err := lib.Build(cc, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		fmt.Println(err)
		return
	}
	var answer func(int32) int32
	purego.RegisterLibFunc(&answer, h, "answer")
	fmt.Println(answer(21))
	// Output: 42
}
