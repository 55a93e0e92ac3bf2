package commtest

import (
	"context"
	"errors"
	"fmt"

	"github.com/pzgo/pz/comm"
)

// prefixCases are the cases of Scan, Exscan, the reduce-scatters and
// Sendrecv with null peers.
func prefixCases() []Case {
	return []Case{
		{"Scan", scanCase},
		{"ReduceScatter", reduceScatterCase},
		{"P2P/Sendrecv", sendrecvCase},
	}
}

func scanCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	send := []int64{int64(me + 1), int64(10 * me), 1}
	got, err := comm.Scan(ctx, c, send, comm.Sum)
	if err != nil {
		return fmt.Errorf("Scan: %w", err)
	}
	// Ranks 0..me: sum of r+1, of 10r, of 1.
	want := []int64{int64((me + 1) * (me + 2) / 2), int64(10 * me * (me + 1) / 2), int64(me + 1)}
	if err := sameSlice("Scan sum", got, want); err != nil {
		return err
	}
	mx, err := comm.Scan(ctx, c, []float64{float64((me * 7) % n)}, comm.Max)
	if err != nil {
		return fmt.Errorf("Scan max: %w", err)
	}
	best := 0.0
	for r := 0; r <= me; r++ {
		best = max(best, float64((r*7)%n))
	}
	if mx[0] != best {
		return fmt.Errorf("Scan max: %v, want %v", mx[0], best)
	}
	ex, err := comm.Exscan(ctx, c, send, comm.Sum)
	if err != nil {
		return fmt.Errorf("Exscan: %w", err)
	}
	if me == 0 {
		if ex != nil {
			return fmt.Errorf("Exscan on rank 0: %v, want nil", ex)
		}
	} else if err := sameSlice("Exscan", ex, []int64{int64(me * (me + 1) / 2), int64(10 * (me - 1) * me / 2), int64(me)}); err != nil {
		return err
	}
	// Lengths that differ: every rank is told.
	if n > 1 {
		bad := make([]int32, 2+me%2)
		if _, err := comm.Scan(ctx, c, bad, comm.Sum); !errors.Is(err, comm.ErrMismatch) {
			return fmt.Errorf("Scan with lengths that differ: %v, want ErrMismatch", err)
		}
	}
	return nil
}

func reduceScatterCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	const k = 3
	send := make([]float64, n*k)
	for i := range send {
		send[i] = float64(i + me)
	}
	got, err := comm.ReduceScatterBlock(ctx, c, send, comm.Sum)
	if err != nil {
		return fmt.Errorf("ReduceScatterBlock: %w", err)
	}
	want := make([]float64, k)
	for j := range k {
		i := me*k + j
		want[j] = float64(n*i + n*(n-1)/2)
	}
	if err := sameSlice("ReduceScatterBlock", got, want); err != nil {
		return err
	}
	// Rank r gets r+1 elements.
	counts := make([]int, n)
	total := 0
	for r := range counts {
		counts[r] = r + 1
		total += r + 1
	}
	vec := make([]int64, total)
	for i := range vec {
		vec[i] = int64(i * (me + 1))
	}
	part, err := comm.ReduceScatter(ctx, c, vec, counts, comm.Sum)
	if err != nil {
		return fmt.Errorf("ReduceScatter: %w", err)
	}
	off := me * (me + 1) / 2
	wantPart := make([]int64, me+1)
	for j := range wantPart {
		wantPart[j] = int64((off + j) * n * (n + 1) / 2)
	}
	if err := sameSlice("ReduceScatter", part, wantPart); err != nil {
		return err
	}
	if n > 1 {
		if _, err := comm.ReduceScatterBlock(ctx, c, make([]float64, n+1), comm.Sum); !errors.Is(err, comm.ErrInvalidArg) {
			return fmt.Errorf("ReduceScatterBlock of %d elements on %d ranks: %v, want ErrInvalidArg", n+1, n, err)
		}
	}
	return nil
}

// sendrecvCase is a halo exchange on a line of ranks (not a ring): the
// ends talk to ProcNull.
func sendrecvCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	left, right := me-1, me+1
	if left < 0 {
		left = comm.ProcNull
	}
	if right >= n {
		right = comm.ProcNull
	}
	for _, count := range []int{4, 1000} { // below and above comm/local's eager limit
		mine := make([]float64, count)
		for i := range mine {
			mine[i] = float64(me*10000 + i)
		}
		fromLeft := make([]float64, count)
		st, err := comm.Sendrecv(ctx, c, mine, right, 5, fromLeft, left, 5)
		if err != nil {
			return fmt.Errorf("Sendrecv: %w", err)
		}
		if left == comm.ProcNull {
			if st.Source != comm.ProcNull || st.Count != 0 {
				return fmt.Errorf("Sendrecv from ProcNull: status %+v", st)
			}
		} else if st.Source != left || st.Count != count || fromLeft[count-1] != float64(left*10000+count-1) {
			return fmt.Errorf("Sendrecv from rank %d: status %+v, last %v", left, st, fromLeft[count-1])
		}
		// And back, in place.
		buf := append([]float64(nil), mine...)
		st, err = comm.SendrecvReplace(ctx, c, buf, left, 6, right, 6)
		if err != nil {
			return fmt.Errorf("SendrecvReplace: %w", err)
		}
		if right != comm.ProcNull && (st.Source != right || buf[0] != float64(right*10000)) {
			return fmt.Errorf("SendrecvReplace from rank %d: status %+v, first %v", right, st, buf[0])
		}
		if right == comm.ProcNull && buf[0] != mine[0] {
			return fmt.Errorf("SendrecvReplace from ProcNull changed the buffer")
		}
	}
	return c.Barrier(ctx)
}
