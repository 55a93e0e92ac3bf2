package shared_test

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"

	"github.com/pzgo/pz/examples/stm/shared"
)

// Every process draws the same frame for the same id, and its checksum
// is FNV-1a's: the camera and a checker agree without sending pixels.
func ExampleFill() {
	a := make([]byte, shared.FrameBytes)
	b := make([]byte, shared.FrameBytes)
	shared.Fill(a, 7)
	shared.Fill(b, 7)
	fmt.Println("id:", shared.ID(a))
	fmt.Println("same frame for the same id:", shared.Checksum(a) == shared.Checksum(b))

	h := fnv.New64a()
	h.Write(a)
	fmt.Println("checksum is FNV-1a:", shared.Checksum(a) == h.Sum64())
	fmt.Printf("checksum: %#016x\n", shared.Checksum(a))

	shared.Fill(b, 8)
	fmt.Println("id:", shared.ID(b))
	fmt.Println("other frame, other checksum:", shared.Checksum(a) != shared.Checksum(b))
	// Output:
	// id: 7
	// same frame for the same id: true
	// checksum is FNV-1a: true
	// checksum: 0xfb5f97e7e7ac7217
	// id: 8
	// other frame, other checksum: true
}

// The camera and the planner each map the run's detections file: what
// one publishes, the other reads as the latest.
func ExampleDetections() {
	dir, err := os.MkdirTemp("", "pz-stm-shared-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	run := filepath.Join(dir, "run")

	camera, err := shared.Open(run)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer camera.Close()
	camera.Reset()
	planner, err := shared.Open(run) // as the other process does
	if err != nil {
		fmt.Println(err)
		return
	}
	defer planner.Close()

	_, _, ok := planner.Latest()
	fmt.Println("before any frame:", ok)

	frame := make([]byte, shared.FrameBytes)
	for id := uint64(1); id <= 6; id++ { // past the 4 slots: slots are reused
		shared.Fill(frame, id)
		camera.Publish(id, shared.Checksum(frame))
	}
	id, sum, ok := planner.Latest()
	fmt.Println("latest:", id, ok)
	shared.Fill(frame, 6)
	fmt.Println("its checksum matches frame 6:", sum == shared.Checksum(frame))

	camera.Reset() // a new run forgets the old one's detections
	_, _, ok = planner.Latest()
	fmt.Println("after Reset:", ok)
	// Output:
	// before any frame: false
	// latest: 6 true
	// its checksum matches frame 6: true
	// after Reset: false
}
