package commtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pzgo/pz/comm"
)

// Large counts: buffers of more than 2^31-1 elements, past MPI-3's int
// counts, which comm/mpi sends with derived datatypes (and reductions in
// pieces). Every backend must accept the programs the other accepts, so the
// same cases run on both. They need gigabytes of memory and tens of seconds,
// so they are not in Cases: RunLargeWorld and RunLargeGroup run them,
// skipping each case whose memory the machine does not have available, and
// skip them all in -short mode.

// big is one element more than an MPI-3 count holds.
const big = math.MaxInt32 + 1

// giB is a gibibyte.
const giB = 1 << 30

// A LargeCase is a case on buffers past 2^31-1 elements; Memory is what it
// needs in all, in bytes, on n ranks.
type LargeCase struct {
	Case
	Memory func(n int) int64
}

// LargeCases returns the large-count cases, in a fixed order: a 3 GiB
// Bcast, a 3 GiB message each way (Send/Recv and Isend/Irecv), an
// AllReduce and a Reduce of 2^31+ elements, and Gather, AllGather, Scatter
// and Alltoall whose counts or displacements pass 2^31-1.
func LargeCases() []LargeCase {
	return []LargeCase{
		{Case{"Bcast3GiB", bcastLargeCase}, func(n int) int64 { return int64(n) * 3 * giB }},
		{Case{"SendRecv3GiB", sendLargeCase}, func(n int) int64 { return 2 * 3 * giB }},
		{Case{"AllReduce", allReduceLargeCase}, func(n int) int64 { return int64(n) * big }},
		{Case{"Gather", gatherLargeCase}, func(n int) int64 { return 2 * big }},
		{Case{"AllGather", allGatherLargeCase}, func(n int) int64 { return int64(n+1) * big }},
		{Case{"Scatter", scatterLargeCase}, func(n int) int64 { return 2 * big }},
		{Case{"Alltoall", alltoallLargeCase}, func(n int) int64 { return 2 * big }},
	}
}

// largeTimeout bounds one large case: gigabytes cross shared memory on
// an oversubscribed machine.
const largeTimeout = 10 * time.Minute

// memoryHeadroom is what a large case leaves to everything else.
const memoryHeadroom = giB

// MemAvailable returns the memory the kernel can give without swapping
// (MemAvailable in /proc/meminfo), or an error where there is none.
func MemAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("commtest: MemAvailable %q: %w", rest, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("commtest: no MemAvailable in /proc/meminfo")
}

// skipLarge says why a large case cannot run with avail bytes available
// on n ranks, or "".
func skipLarge(cs LargeCase, n int, avail int64, availErr error) string {
	if availErr != nil {
		return fmt.Sprintf("memory available unknown (%v)", availErr)
	}
	if need := cs.Memory(n) + memoryHeadroom; avail < need {
		return fmt.Sprintf("needs %.1f GiB of memory at %d ranks, %.1f GiB available", float64(need)/giB, n, float64(avail)/giB)
	}
	return ""
}

// release gives the last case's buffers back to the system before the next
// case measures what is available.
func release() {
	runtime.GC()
	debug.FreeOSMemory()
}

// RunLargeGroup runs the large cases on fresh groups of n in-process ranks
// started by launch, as RunGroup does.
func RunLargeGroup(t *testing.T, n int, launch func(ctx context.Context, n int, fn func(ctx context.Context, c comm.Comm) error) error) {
	t.Helper()
	if testing.Short() {
		t.Skip("large-count cases skipped in -short mode")
	}
	for _, cs := range LargeCases() {
		t.Run(cs.Name, func(t *testing.T) {
			release()
			avail, err := MemAvailable()
			if why := skipLarge(cs, n, avail, err); why != "" {
				t.Skip(why)
			}
			ctx, cancel := context.WithTimeout(context.Background(), largeTimeout)
			defer cancel()
			err = launch(ctx, n, cs.Run)
			release()
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// RunLargeWorld runs the large cases on c, as RunWorld does; every rank
// must call it. Rank 0 measures the memory available (the ranks of a test
// job share one machine) and every rank skips alike.
func RunLargeWorld(t *testing.T, c comm.Comm) {
	t.Helper()
	if testing.Short() {
		t.Skip("large-count cases skipped in -short mode")
	}
	var cases []Case
	for _, cs := range LargeCases() {
		run := cs.Run
		cs.Run = func(ctx context.Context, c comm.Comm) error {
			release()
			// Rank 0 measures after every rank has released its memory.
			if err := c.Barrier(ctx); err != nil {
				return err
			}
			avail, aerr := MemAvailable()
			word := []int64{avail}
			if aerr != nil {
				word[0] = -1
			}
			if err := comm.Bcast(ctx, c, word, 0); err != nil {
				return err
			}
			if word[0] < 0 {
				aerr = fmt.Errorf("not readable on rank 0")
			}
			if why := skipLarge(cs, c.Size(), word[0], aerr); why != "" {
				return errSkip{why}
			}
			defer release()
			return run(ctx, c)
		}
		cases = append(cases, cs.Case)
	}
	runWorld(t, c, cases, largeTimeout)
}

// errSkip is how a case run by runWorld skips (on every rank alike).
type errSkip struct{ why string }

func (e errSkip) Error() string { return "skipped: " + e.why }

// pattern is the byte at i of rank r's data: it differs between
// neighbouring bytes and between the MiB blocks of a buffer (and the 2^30-
// element pieces it may travel in), so a piece put at the wrong offset
// shows.
func pattern(i, r int) byte { return byte(i*131 + i>>20*17 + i>>30*71 + r*29) }

// mib is the block size of the pattern.
const mib = 1 << 20

// patternRow is byte(j*131) for j below a MiB and 256 more: within one MiB
// block the pattern is byte(j*131 + c) for a constant c, which is
// patternRow[j+k] with k = c / 131 (mod 256; 131 is odd), so fill and
// check move whole blocks with copy and bytes.Equal.
var patternRow = func() []byte {
	row := make([]byte, mib+256)
	for j := range row {
		row[j] = byte(j * 131)
	}
	return row
}()

// inv131 is the inverse of 131 modulo 256.
var inv131 = func() byte {
	for k := 1; k < 256; k += 2 {
		if byte(k*131) == 1 {
			return byte(k)
		}
	}
	panic("131 is odd")
}()

// segments calls f for each run of b within one MiB block of the pattern
// (absolute offset from), with the run's offset in b and the row it equals.
func segments(b []byte, from, r int, f func(lo int, row []byte) error) error {
	for lo := 0; lo < len(b); {
		a := lo + from
		j := a % mib
		hi := min(len(b), lo+mib-j)
		c := byte(a>>20*17 + a>>30*71 + r*29)
		k := int(c * inv131)
		if err := f(lo, patternRow[j+k:j+k+hi-lo]); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// fill writes pattern(i+from, r) at every i of b.
func fill(b []byte, from, r int) {
	_ = segments(b, from, r, func(lo int, row []byte) error {
		copy(b[lo:], row)
		return nil
	})
}

// checkBytes verifies that b[i] == pattern(i+from, r) for every i.
func checkBytes(what string, b []byte, from, r int) error {
	return segments(b, from, r, func(lo int, row []byte) error {
		if bytes.Equal(b[lo:lo+len(row)], row) {
			return nil
		}
		for i, w := range row {
			if b[lo+i] != w {
				return fmt.Errorf("%s: byte %d of %d is %d, want %d", what, lo+i, len(b), b[lo+i], w)
			}
		}
		return nil
	})
}

func bcastLargeCase(ctx context.Context, c comm.Comm) error {
	root := c.Size() - 1
	buf := make([]byte, 3*giB)
	if c.Rank() == root {
		fill(buf, 0, root)
	}
	if err := comm.Bcast(ctx, c, buf, root); err != nil {
		return fmt.Errorf("Bcast of 3 GiB: %w", err)
	}
	return checkBytes("Bcast of 3 GiB", buf, 0, root)
}

// sendLargeCase sends 3 GiB from rank 0 to the last rank (Send, Recv) and
// 3 GiB less a byte back (Isend, Irecv), which rank 0 receives over its
// own data one byte lower, so every byte it checks was overwritten. One
// rank sends to itself.
func sendLargeCase(ctx context.Context, c comm.Comm) error {
	me, last := c.Rank(), c.Size()-1
	if me != 0 && me != last {
		return nil
	}
	buf := make([]byte, 3*giB)
	if me == 0 {
		fill(buf, 0, 0)
	}
	if c.Size() == 1 {
		// To itself: Isend, then Recv into a second buffer.
		req, err := c.Isend(comm.BufOf(buf), 0, 7)
		if err != nil {
			return fmt.Errorf("Isend of 3 GiB to itself: %w", err)
		}
		got := make([]byte, len(buf))
		if _, err := comm.Recv(ctx, c, got, 0, 7); err != nil {
			return fmt.Errorf("Recv of 3 GiB from itself: %w", err)
		}
		if _, err := req.Wait(ctx); err != nil {
			return fmt.Errorf("Isend of 3 GiB to itself: %w", err)
		}
		return checkBytes("3 GiB sent to itself", got, 0, 0)
	}
	if me == 0 {
		if err := comm.Send(ctx, c, buf, last, 7); err != nil {
			return fmt.Errorf("Send of 3 GiB: %w", err)
		}
		req, err := c.Irecv(comm.BufOf(buf[:len(buf)-1]), last, 8)
		if err != nil {
			return fmt.Errorf("Irecv of 3 GiB: %w", err)
		}
		st, err := req.Wait(ctx)
		if err != nil {
			return fmt.Errorf("Irecv of 3 GiB: %w", err)
		}
		if st.Count != len(buf)-1 {
			return fmt.Errorf("Irecv of 3 GiB: status counts %d bytes, want %d", st.Count, len(buf)-1)
		}
		return checkBytes("3 GiB received by Irecv", buf[:len(buf)-1], 1, 0)
	}
	st, err := comm.Recv(ctx, c, buf, 0, 7)
	if err != nil {
		return fmt.Errorf("Recv of 3 GiB: %w", err)
	}
	if st.Count != len(buf) {
		return fmt.Errorf("Recv of 3 GiB: status counts %d bytes, want %d", st.Count, len(buf))
	}
	if err := checkBytes("3 GiB received by Recv", buf, 0, 0); err != nil {
		return err
	}
	req, err := c.Isend(comm.BufOf(buf[1:]), 0, 8)
	if err != nil {
		return fmt.Errorf("Isend of 3 GiB: %w", err)
	}
	_, err = req.Wait(ctx)
	return err
}

// allReduceLargeCase sums 2^31 bytes in place on every rank (uint8 sums
// wrap alike in Go and MPI), then reduces them again to the last rank.
func allReduceLargeCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	buf := make([]byte, big)
	fill(buf, 0, 0)
	for i := range buf {
		buf[i] += byte(me)
	}
	if err := c.AllReduce(ctx, comm.BufOf(buf), comm.BufOf(buf), comm.Sum); err != nil {
		return fmt.Errorf("AllReduce of 2^31 bytes: %w", err)
	}
	off := byte(n * (n - 1) / 2)
	want := func(i int) byte { return byte(n)*pattern(i, 0) + off }
	for i := 0; i < len(buf); i += 4099 {
		if buf[i] != want(i) {
			return fmt.Errorf("AllReduce of 2^31 bytes: byte %d is %d, want %d", i, buf[i], want(i))
		}
	}
	for _, i := range []int{giB - 1, giB, 2*giB - 1, len(buf) - 1} {
		if buf[i] != want(i) {
			return fmt.Errorf("AllReduce of 2^31 bytes: byte %d is %d, want %d", i, buf[i], want(i))
		}
	}
	return nil
}

// gatherLargeCase gathers on rank 0 a 2^31-byte part from the last rank
// and 1000 bytes from every other: one rank's count passes MPI's limit.
func gatherLargeCase(ctx context.Context, c comm.Comm) error {
	n, me, last := c.Size(), c.Rank(), c.Size()-1
	size := func(r int) int {
		if r == last {
			return big
		}
		return 1000
	}
	send := make([]byte, size(me))
	fill(send, 0, me)
	var got []byte
	counts, err := c.Gather(ctx, comm.BufOf(send), 0, func(total int) []byte {
		got = make([]byte, total)
		return got
	})
	if err != nil {
		return fmt.Errorf("Gather of 2^31 bytes: %w", err)
	}
	if me != 0 {
		return nil
	}
	off := 0
	for r := range n {
		if counts[r] != size(r) {
			return fmt.Errorf("Gather of 2^31 bytes: counts[%d] = %d, want %d", r, counts[r], size(r))
		}
		if err := checkBytes(fmt.Sprintf("Gather of 2^31 bytes, rank %d's part", r), got[off:off+size(r)], 0, r); err != nil {
			return err
		}
		off += size(r)
	}
	return nil
}

// allGatherLargeCase gathers on every rank parts that add up to 2^31+n
// bytes: the displacements pass MPI's limit.
func allGatherLargeCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	per := big/n + 1
	send := make([]byte, per)
	fill(send, 0, me)
	parts, err := comm.AllGather(ctx, c, send)
	if err != nil {
		return fmt.Errorf("AllGather of 2^31 bytes: %w", err)
	}
	send = nil
	for r, p := range parts {
		if len(p) != per {
			return fmt.Errorf("AllGather of 2^31 bytes: part %d has %d bytes, want %d", r, len(p), per)
		}
		if err := checkBytes(fmt.Sprintf("AllGather of 2^31 bytes, part %d", r), p, 0, r); err != nil {
			return err
		}
	}
	return nil
}

// scatterLargeCase scatters 2^31+n bytes from the last rank, one byte
// more to each rank than the one before.
func scatterLargeCase(ctx context.Context, c comm.Comm) error {
	n, me, root := c.Size(), c.Rank(), c.Size()-1
	counts, total := make([]int, n), 0
	for r := range counts {
		counts[r] = big/n + r + 1
		total += counts[r]
	}
	var send []byte
	if me == root {
		send = make([]byte, total)
		fill(send, 0, root)
	}
	var got []byte
	if err := c.Scatter(ctx, comm.BufOf(send), counts, root, func(k int) []byte {
		got = make([]byte, k)
		return got
	}); err != nil {
		return fmt.Errorf("Scatter of 2^31 bytes: %w", err)
	}
	if len(got) != counts[me] {
		return fmt.Errorf("Scatter of 2^31 bytes: got %d bytes, want %d", len(got), counts[me])
	}
	off := 0
	for r := range me {
		off += counts[r]
	}
	return checkBytes("Scatter of 2^31 bytes", got, off, root)
}

// alltoallLargeCase: rank 0 sends 2^31 bytes to the last rank and 3 bytes
// to every other; the others send 3 bytes to each. Only the last rank's
// receive passes MPI's limit, so the ranks must agree on the path.
func alltoallLargeCase(ctx context.Context, c comm.Comm) error {
	n, me, last := c.Size(), c.Rank(), c.Size()-1
	count := func(from, to int) int {
		if from == 0 && to == last {
			return big
		}
		return 3
	}
	sendCounts, total := make([]int, n), 0
	for to := range sendCounts {
		sendCounts[to] = count(me, to)
		total += sendCounts[to]
	}
	send := make([]byte, total)
	off := 0
	for to, k := range sendCounts {
		fill(send[off:off+k], 0, me*n+to)
		off += k
	}
	var got []byte
	recvCounts, err := c.Alltoall(ctx, comm.BufOf(send), sendCounts, func(k int) []byte {
		got = make([]byte, k)
		return got
	})
	if err != nil {
		return fmt.Errorf("Alltoall of 2^31 bytes: %w", err)
	}
	send = nil
	off = 0
	for from, k := range recvCounts {
		if k != count(from, me) {
			return fmt.Errorf("Alltoall of 2^31 bytes: %d bytes from rank %d, want %d", k, from, count(from, me))
		}
		part := got[off : off+k]
		if k < 1<<20 {
			want := make([]byte, k)
			fill(want, 0, from*n+me)
			if !bytes.Equal(part, want) {
				return fmt.Errorf("Alltoall of 2^31 bytes: part from rank %d is %v, want %v", from, part, want)
			}
		} else if err := checkBytes(fmt.Sprintf("Alltoall of 2^31 bytes, part from rank %d", from), part, 0, from*n+me); err != nil {
			return err
		}
		off += k
	}
	return nil
}
