package local_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// Four ranks as goroutines: each contributes its rank, all get the sum.
func ExampleRun() {
	err := local.Run(context.Background(), 4, func(ctx context.Context, c comm.Comm) error {
		sum, err := comm.AllReduce(ctx, c, []int{c.Rank()}, comm.Sum)
		if err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Println("sum of ranks:", sum[0])
		}
		return nil
	})
	fmt.Println("error:", err)
	// Output:
	// sum of ranks: 6
	// error: <nil>
}

// A failing rank cancels the others: rank 1 waits in a collective that
// rank 0 never joins, and returns instead of hanging.
func ExampleRun_failure() {
	err := local.Run(context.Background(), 2, func(ctx context.Context, c comm.Comm) error {
		if c.Rank() == 0 {
			return errors.New("input file missing")
		}
		return c.Barrier(ctx)
	})
	var re *comm.RankError
	errors.As(err, &re)
	fmt.Println("first failed rank:", re.Rank)
	fmt.Println("others see a broken world:", errors.Is(err, comm.ErrBroken))
	// Output:
	// first failed rank: 0
	// others see a broken world: true
}

// New gives the communicators without starting goroutines.
func ExampleNew() {
	comms, err := local.New(2)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	// A small message is buffered: Send returns before the receive.
	if err := comm.Send(ctx, comms[0], []float64{1.5, 2.5}, 1, 7); err != nil {
		fmt.Println(err)
	}
	got, st, err := comm.RecvNew[float64](ctx, comms[1], 0, 7)
	fmt.Println(got, st.Source, st.Tag, err)
	// Output: [1.5 2.5] 0 7 <nil>
}
