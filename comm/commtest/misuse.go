package commtest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pzgo/pz/comm"
)

// The misuse cases call collectives wrongly on purpose. Each runs on a
// duplicate of the communicator (a Split with one color), so that even a
// backend that gave up on the duplicate would leave the caller's
// communicator usable, and each checks afterwards that the duplicate still
// works: a consistent error must not break it.

// misuse runs body on a duplicate of c, then checks the duplicate still
// computes a correct AllReduce.
func misuse(ctx context.Context, c comm.Comm, body func(d comm.Comm) error) error {
	d, err := c.Split(ctx, 0, c.Rank())
	if err != nil {
		return fmt.Errorf("duplicating the communicator: %w", err)
	}
	defer d.Free()
	if err := body(d); err != nil {
		return err
	}
	n := d.Size()
	got, err := comm.AllReduce(ctx, d, []int64{int64(d.Rank())}, comm.Sum)
	if err != nil {
		return fmt.Errorf("AllReduce after the misuse: %w", err)
	}
	if got[0] != int64(n*(n-1)/2) {
		return fmt.Errorf("AllReduce after the misuse: got %d, want %d", got[0], n*(n-1)/2)
	}
	return nil
}

// expect checks that err wraps target.
func expect(what string, err, target error) error {
	if !errors.Is(err, target) {
		return fmt.Errorf("%s: got error %v, want one wrapping %q", what, err, target)
	}
	return nil
}

// mismatch runs the calls expecting ErrMismatch on every rank when the
// communicator has more than one rank, and success on a single rank (where
// nothing can disagree).
func mismatch(d comm.Comm, calls map[string]func() error) error {
	for _, what := range sortedKeys(calls) {
		err := calls[what]()
		if d.Size() == 1 {
			if err != nil {
				return fmt.Errorf("%s on one rank: %w", what, err)
			}
			continue
		}
		if err := expect(what, err, comm.ErrMismatch); err != nil {
			return err
		}
		var me *comm.MismatchError
		if !errors.As(err, &me) || me.Detail == "" {
			return fmt.Errorf("%s: %v is not a *comm.MismatchError with details", what, err)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Insertion sort: tiny maps, and every rank must use the same order.
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

func misuseCountCase(ctx context.Context, c comm.Comm) error {
	return misuse(ctx, c, func(d comm.Comm) error {
		me := d.Rank()
		return mismatch(d, map[string]func() error{
			"AllReduce with lengths rank+1": func() error {
				_, err := comm.AllReduce(ctx, d, make([]float64, me+1), comm.Sum)
				return err
			},
			"Reduce with lengths rank+1": func() error {
				_, err := comm.Reduce(ctx, d, make([]int32, me+1), comm.Sum, 0)
				return err
			},
			"BcastSlice with lengths rank+1": func() error {
				return comm.Bcast(ctx, d, make([]uint8, me+1), 0)
			},
			// Native on comm/local and (integers) on MPI, a fallback
			// elsewhere: every rank is told either way.
			"Scan of int32 with lengths 2+rank%2": func() error {
				_, err := comm.Scan(ctx, d, make([]int32, 2+me%2), comm.Sum)
				return err
			},
			"AllReduceMaxLoc with lengths rank+1": func() error {
				_, err := comm.AllReduceMaxLoc(ctx, d, make([]comm.Loc[float32], me+1))
				return err
			},
			"AllGatherTo with block lengths rank+1": func() error {
				return comm.AllGatherTo(ctx, d, make([]float64, d.Size()*(me+1)), make([]float64, me+1))
			},
			// 2 elements fit comm/mpi's agreement step, 40 do not.
			"AllGatherTo with block lengths 2 and 40": func() error {
				k := 2 + 38*(me%2)
				return comm.AllGatherTo(ctx, d, make([]int32, d.Size()*k), make([]int32, k))
			},
			"Exscan of float64 with lengths rank+1": func() error {
				_, err := comm.Exscan(ctx, d, make([]float64, me+1), comm.Sum)
				return err
			},
			// Under MPI an AllReduce of at most 64 bytes rides in the
			// agreement step; larger ones follow it: both sides of that
			// line must still meet in one agreement.
			"AllReduce of 8 float64 on rank 0, 1000 elsewhere": func() error {
				n := 1000
				if me == 0 {
					n = 8
				}
				_, err := comm.AllReduce(ctx, d, make([]float64, n), comm.Sum)
				return err
			},
			"AllReduce on rank 0, Bcast of as many bytes elsewhere": func() error {
				if me == 0 {
					_, err := comm.AllReduce(ctx, d, []float64{1}, comm.Sum)
					return err
				}
				return comm.Bcast(ctx, d, []float64{1}, 0)
			},
		})
	})
}

func misuseTypeCase(ctx context.Context, c comm.Comm) error {
	return misuse(ctx, c, func(d comm.Comm) error {
		me := d.Rank()
		return mismatch(d, map[string]func() error{
			"AllReduce of float64 on rank 0, int64 elsewhere": func() error {
				if me == 0 {
					_, err := comm.AllReduce(ctx, d, []float64{1, 2}, comm.Sum)
					return err
				}
				_, err := comm.AllReduce(ctx, d, []int64{1, 2}, comm.Sum)
				return err
			},
			"BcastSlice of int32 on rank 0, float32 elsewhere": func() error {
				if me == 0 {
					return comm.Bcast(ctx, d, []int32{1, 2, 3}, 0)
				}
				return comm.Bcast(ctx, d, []float32{1, 2, 3}, 0)
			},
		})
	})
}

func misuseOpCase(ctx context.Context, c comm.Comm) error {
	return misuse(ctx, c, func(d comm.Comm) error {
		op := comm.Max
		if d.Rank() == 0 {
			op = comm.Sum
		}
		return mismatch(d, map[string]func() error{
			"AllReduce with Sum on rank 0, Max elsewhere": func() error {
				_, err := comm.AllReduce(ctx, d, []int16{1, 2, 3}, op)
				return err
			},
			"Reduce with Sum on rank 0, Max elsewhere": func() error {
				_, err := comm.Reduce(ctx, d, []float32{1}, op, 0)
				return err
			},
		})
	})
}

// misuseNilUserOpCase: a nil user op on the last rank is a *comm.ArgError
// on every rank, named after the call the user made (ReduceUser,
// AllReduceUser: not Reduce and AllReduce), on every backend.
func misuseNilUserOpCase(ctx context.Context, c comm.Comm) error {
	return misuse(ctx, c, func(d comm.Comm) error {
		op := comm.UserOp("sum", func(in, inout []float64) {
			for i := range in {
				inout[i] += in[i]
			}
		}, true)
		if d.Rank() == d.Size()-1 {
			op = nil
		}
		for _, tc := range []struct {
			name string
			call func() error
		}{
			{"AllReduceUser", func() error { _, err := comm.AllReduceUser(ctx, d, []float64{1, 2}, op); return err }},
			{"ReduceUser", func() error { _, err := comm.ReduceUser(ctx, d, []float64{1, 2}, op, 0); return err }},
		} {
			err := tc.call()
			var ae *comm.ArgError
			if !errors.As(err, &ae) || ae.Op != tc.name || ae.Rank != d.Size()-1 || !strings.Contains(ae.Detail, "nil user op") {
				return fmt.Errorf("%s with a nil op on rank %d: got %v, want a *comm.ArgError of %s naming that rank and the nil op", tc.name, d.Size()-1, err, tc.name)
			}
		}
		return nil
	})
}

func misuseRootCase(ctx context.Context, c comm.Comm) error {
	return misuse(ctx, c, func(d comm.Comm) error {
		me := d.Rank()
		return mismatch(d, map[string]func() error{
			"BcastSlice with root rank%2": func() error {
				return comm.Bcast(ctx, d, []float64{float64(me)}, me%2)
			},
			"Reduce with every rank its own root": func() error {
				_, err := comm.Reduce(ctx, d, []int64{1}, comm.Sum, me)
				return err
			},
			"Gather with root rank%2": func() error {
				_, err := comm.Gather(ctx, d, []int8{1}, me%2)
				return err
			},
		})
	})
}

// invalid runs each call and expects ErrInvalidArg.
func invalid(calls map[string]func() error) error {
	for _, what := range sortedKeys(calls) {
		err := calls[what]()
		if err := expect(what, err, comm.ErrInvalidArg); err != nil {
			return err
		}
		var ae *comm.ArgError
		if !errors.As(err, &ae) {
			return fmt.Errorf("%s: %v is not a *comm.ArgError", what, err)
		}
	}
	return nil
}

func misuseRootRangeCase(ctx context.Context, c comm.Comm) error {
	return misuse(ctx, c, func(d comm.Comm) error {
		n := d.Size()
		return invalid(map[string]func() error{
			"BcastSlice with root = size": func() error {
				return comm.Bcast(ctx, d, []float64{1}, n)
			},
			"Reduce with root -1": func() error {
				_, err := comm.Reduce(ctx, d, []float64{1}, comm.Sum, -1)
				return err
			},
			"Gather with root = size": func() error {
				_, err := comm.Gather(ctx, d, []int32{1}, n)
				return err
			},
			"Scatter with root = size+1": func() error {
				_, err := comm.Scatter[int32](ctx, d, nil, n+1)
				return err
			},
		})
	})
}

func misuseUnsupportedCase(ctx context.Context, c comm.Comm) error {
	return misuse(ctx, c, func(d comm.Comm) error {
		return invalid(map[string]func() error{
			"AllReduce Min of complex128": func() error {
				_, err := comm.AllReduce(ctx, d, []complex128{1}, comm.Min)
				return err
			},
			"AllReduce BXor of float64": func() error {
				_, err := comm.AllReduce(ctx, d, []float64{1}, comm.BXor)
				return err
			},
			"AllReduce with NoOp": func() error {
				_, err := comm.AllReduce(ctx, d, []int32{1}, comm.NoOp)
				return err
			},
			"Reduce LAnd of float32": func() error {
				_, err := comm.Reduce(ctx, d, []float32{1}, comm.LAnd, 0)
				return err
			},
		})
	})
}

func misuseCountsCase(ctx context.Context, c comm.Comm) error {
	return misuse(ctx, c, func(d comm.Comm) error {
		n, me := d.Size(), d.Rank()
		return invalid(map[string]func() error{
			"Scatter with size+1 parts on root": func() error {
				var parts [][]float64
				if me == 0 {
					parts = make([][]float64, n+1)
				}
				_, err := comm.Scatter(ctx, d, parts, 0)
				return err
			},
			"Alltoall with size+1 parts on the last rank": func() error {
				parts := make([][]int64, n)
				if me == n-1 {
					parts = append(parts, nil)
				}
				_, err := comm.Alltoall(ctx, d, parts)
				return err
			},
		})
	})
}

func misuseRecvLenCase(ctx context.Context, c comm.Comm) error {
	return misuse(ctx, c, func(d comm.Comm) error {
		return invalid(map[string]func() error{
			"AllReduceTo with a short dst on rank 0": func() error {
				dst := make([]float64, 4)
				if d.Rank() == 0 {
					dst = dst[:3]
				}
				return comm.AllReduceTo(ctx, d, dst, []float64{1, 2, 3, 4}, comm.Sum)
			},
		})
	})
}

func misuseUnencodableCase(ctx context.Context, c comm.Comm) error {
	return misuse(ctx, c, func(d comm.Comm) error {
		return invalid(map[string]func() error{
			"Bcast of a channel": func() error {
				_, err := comm.BcastValue(ctx, d, make(chan int), 0)
				return err
			},
			"AllGatherValues with a func on rank 0": func() error {
				var v any = d.Rank()
				if d.Rank() == 0 {
					v = func() {}
				}
				_, err := comm.AllGatherValues(ctx, d, v)
				return err
			},
		})
	})
}

// misuseLocCase: ranks that disagree on MinLoc or MaxLoc, on the value
// type or on the length get the same *comm.MismatchError of AllReduceLoc
// on every rank, with MPI's agreement's details (the op is min or max,
// the count counts pairs), small and past comm/local's eager size.
func misuseLocCase(ctx context.Context, c comm.Comm) error {
	return misuse(ctx, c, func(d comm.Comm) error {
		me := d.Rank()
		if d.Size() == 1 {
			return nil
		}
		for _, n := range []int{1, 600} {
			minOrMax := func(send []comm.Loc[float64]) error {
				var err error
				if me == 0 {
					_, err = comm.AllReduceMaxLoc(ctx, d, send)
				} else {
					_, err = comm.AllReduceMinLoc(ctx, d, send)
				}
				return err
			}
			for _, tc := range []struct {
				what, detail string
				run          func() error
			}{
				{"MaxLoc on rank 0, MinLoc elsewhere", "op: rank 0 has max, rank 1 has min", func() error {
					return minOrMax(make([]comm.Loc[float64], n))
				}},
				{"MaxLoc of float64 on rank 0, int64 elsewhere", "datatype: rank 0 has float64, rank 1 has int64", func() error {
					var err error
					if me == 0 {
						_, err = comm.AllReduceMaxLoc(ctx, d, make([]comm.Loc[float64], n))
					} else {
						_, err = comm.AllReduceMaxLoc(ctx, d, make([]comm.Loc[int64], n))
					}
					return err
				}},
				{"MinLoc of n+rank pairs", fmt.Sprintf("count: rank 0 has %d, rank 1 has %d", n, n+1), func() error {
					_, err := comm.AllReduceMinLoc(ctx, d, make([]comm.Loc[int32], n+me))
					return err
				}},
			} {
				err := tc.run()
				var mm *comm.MismatchError
				if !errors.As(err, &mm) || mm.Op != "AllReduceLoc" || !strings.HasPrefix(mm.Detail, tc.detail) {
					return fmt.Errorf("%s (%d pairs): got %v, want a *comm.MismatchError of AllReduceLoc saying %q", tc.what, n, err, tc.detail)
				}
			}
		}
		// Still usable for a correct one.
		got, err := comm.AllReduceMaxLoc(ctx, d, []comm.Loc[int64]{{Value: int64(me), Index: me}})
		if err != nil || got[0] != (comm.Loc[int64]{Value: int64(d.Size() - 1), Index: d.Size() - 1}) {
			return fmt.Errorf("AllReduceMaxLoc after the mismatches: %v, %v", got, err)
		}
		return nil
	})
}

// misuseP2PCase: point-to-point calls with a peer outside the
// communicator, a negative tag or one past comm.MaxTag, or an invalid buffer fail on the calling
// rank with a *comm.ArgError of that call on every backend, and leave it
// usable.
func misuseP2PCase(ctx context.Context, c comm.Comm) error {
	return misuse(ctx, c, func(d comm.Comm) error {
		n := d.Size()
		if err := invalid(map[string]func() error{
			"Send to rank = size": func() error {
				return comm.Send(ctx, d, []int32{1}, n, 0)
			},
			"Send to rank -3": func() error {
				return comm.Send(ctx, d, []int32{1}, -3, 0)
			},
			"Send with tag -1": func() error {
				return comm.Send(ctx, d, []int32{1}, 0, -1)
			},
			"Recv from rank = size": func() error {
				_, err := d.Recv(ctx, comm.Int32, n, 0, func(int) ([]byte, error) { return make([]byte, 4), nil })
				return err
			},
			"Send with a tag past comm.MaxTag": func() error {
				return comm.Send(ctx, d, []int32{1}, 0, comm.MaxTag+1)
			},
			"Irecv with a tag past comm.MaxTag": func() error {
				_, err := comm.Irecv(d, make([]int32, 1), 0, comm.MaxTag+1)
				return err
			},
			"Irecv with tag -5": func() error {
				_, err := comm.Irecv(d, make([]int32, 1), 0, -5)
				return err
			},
			"Isend of a ragged buffer": func() error {
				_, err := d.Isend(comm.Buf{Type: comm.Int32, Bytes: make([]byte, 5)}, 0, 0)
				return err
			},
			// An invalid datatype is an *ArgError on every backend (comm/mpi
			// returned a plain error wrapping ErrInvalidArg for these).
			"Recv of an invalid datatype": func() error {
				_, err := d.Recv(ctx, comm.Invalid, 0, 0, func(int) ([]byte, error) { return nil, nil })
				return err
			},
			"Iprobe of an invalid datatype": func() error {
				_, _, err := d.Iprobe(comm.Invalid, comm.AnySource, comm.AnyTag)
				return err
			},
			"Probe of an invalid datatype": func() error {
				_, err := d.Probe(ctx, comm.Datatype(99), 0, 0)
				return err
			},
			"Improbe of an invalid datatype": func() error {
				_, err := d.Improbe(comm.Invalid, comm.AnySource, 0)
				return err
			},
			"Mprobe of an invalid datatype": func() error {
				_, err := d.Mprobe(ctx, comm.Invalid, 0, comm.AnyTag)
				return err
			},
		}); err != nil {
			return err
		}
		// Sendrecv and SendrecvReplace name themselves, whichever path
		// they take (the backend's own, or with a ProcNull peer an Isend
		// and a Recv).
		for _, p := range []struct{ dest, source int }{{n, 0}, {n, comm.ProcNull}, {comm.ProcNull, -5}, {comm.AnySource, 0}} {
			_, err := comm.Sendrecv(ctx, d, []int32{1}, p.dest, 0, make([]int32, 1), p.source, 0)
			var ae *comm.ArgError
			if !errors.As(err, &ae) || ae.Op != "Sendrecv" {
				return fmt.Errorf("Sendrecv to %d from %d: got %v, want a *comm.ArgError of Sendrecv", p.dest, p.source, err)
			}
			_, err = comm.SendrecvReplace(ctx, d, []int32{1}, p.dest, 0, p.source, 0)
			if !errors.As(err, &ae) || ae.Op != "SendrecvReplace" {
				return fmt.Errorf("SendrecvReplace to %d from %d: got %v, want a *comm.ArgError of SendrecvReplace", p.dest, p.source, err)
			}
		}
		// A wildcard or null peer where the call takes none is named as
		// the constant, not as a rank out of range.
		for what, tc := range map[string]struct {
			run  func() error
			want string
		}{
			"Send to AnySource": {func() error { return comm.Send(ctx, d, []int32{1}, comm.AnySource, 0) }, "peer rank -1 is comm.AnySource, which only receives and probes take"},
			"Isend to AnySource": {func() error {
				_, err := comm.Isend(d, []int32{1}, comm.AnySource, 0)
				return err
			}, "peer rank -1 is comm.AnySource"},
			"Sendrecv to AnySource": {func() error {
				_, err := comm.Sendrecv(ctx, d, []int32{1}, comm.AnySource, 0, make([]int32, 1), 0, 0)
				return err
			}, "peer rank -1 is comm.AnySource"},
			"SendInit to AnySource": {func() error {
				_, err := comm.SendInit(d, []int32{1}, comm.AnySource, 0)
				return err
			}, "peer rank -1 is comm.AnySource"},
			"Comm.Send to ProcNull": {func() error { return d.Send(ctx, comm.BufOf([]int32{1}), comm.ProcNull, 0) }, "peer rank -2 is comm.ProcNull, which comm.Send"},
			"Comm.Isend to ProcNull": {func() error {
				_, err := d.Isend(comm.BufOf([]int32{1}), comm.ProcNull, 0)
				return err
			}, "peer rank -2 is comm.ProcNull"},
		} {
			err := tc.run()
			var ae *comm.ArgError
			if !errors.As(err, &ae) || !strings.Contains(ae.Detail, tc.want) {
				return fmt.Errorf("%s: got %v, want a *comm.ArgError saying %q", what, err, tc.want)
			}
		}
		return nil
	})
}

// misuseAliasCase: a reduction whose send and receive buffers are the same
// slice is in place (the result replaces the input), at the first and the
// last rank as root; buffers that overlap
// otherwise are refused with a *comm.ArgError on every rank, on every
// backend, small (eager) and large.
func misuseAliasCase(ctx context.Context, c comm.Comm) error {
	return misuse(ctx, c, func(d comm.Comm) error {
		n, me := d.Size(), d.Rank()
		for _, size := range []int{4, 3000} {
			b := make([]float64, size+1)
			for i := range b {
				b[i] = float64(me + 1)
			}
			in := comm.BufOf(b[:size])
			if err := d.AllReduce(ctx, in, in, comm.Sum); err != nil {
				return fmt.Errorf("AllReduce in place (%d): %w", size, err)
			}
			if want := float64(n * (n + 1) / 2); b[0] != want || b[size-1] != want {
				return fmt.Errorf("AllReduce in place (%d): got %v, want %v", size, b[0], want)
			}
			if err := d.Reduce(ctx, in, in, comm.Max, 0); err != nil {
				return fmt.Errorf("Reduce in place (%d): %w", size, err)
			}
			// At the last rank (MPICH before 4.2 crashed in MPI_Reduce in
			// place past 2 KiB at a root other than 0).
			for i := range b {
				b[i] = float64(me + 1)
			}
			if err := d.Reduce(ctx, in, in, comm.Sum, n-1); err != nil {
				return fmt.Errorf("Reduce in place at rank %d (%d): %w", n-1, size, err)
			}
			if want := float64(n * (n + 1) / 2); me == n-1 && (b[0] != want || b[size-1] != want) {
				return fmt.Errorf("Reduce in place at rank %d (%d): got %v, want %v", n-1, size, b[0], want)
			}
			last := n - 1 // the rank whose buffers overlap
			err := invalid(map[string]func() error{
				fmt.Sprintf("AllReduce with overlapping buffers on rank %d (%d)", last, size): func() error {
					send, recv := comm.BufOf(b[:size]), comm.BufOf(make([]float64, size))
					if me == last {
						recv = comm.BufOf(b[1 : size+1])
					}
					return d.AllReduce(ctx, send, recv, comm.Sum)
				},
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// misuseNilAllocCase: a nil Alloc on one rank (the last) of a collective
// that returns its result through one (Gather on root, AllGather, Scatter,
// Alltoall, and their non-blocking forms) is an *ArgError naming that rank
// on every rank, not a nil dereference (which, in a non-blocking
// collective, crashed the process from the engine's goroutine).
func misuseNilAllocCase(ctx context.Context, c comm.Comm) error {
	return misuse(ctx, c, func(d comm.Comm) error {
		n, me := d.Size(), d.Rank()
		last := n - 1
		alloc := func(k int) []byte { return make([]byte, 8*k) }
		if me == last {
			alloc = nil
		}
		one := comm.BufOf([]int64{int64(me)})
		parts := make([]int, n)
		for i := range parts {
			parts[i] = 1
		}
		var all []int64
		if me == 0 {
			all = make([]int64, n)
		}
		wait := func(r comm.Request, err error) error {
			if err != nil {
				return err
			}
			_, err = r.Wait(ctx)
			return err
		}
		calls := map[string]func() error{
			"Gather":    func() error { _, err := d.Gather(ctx, one, last, alloc); return err },
			"AllGather": func() error { _, err := d.AllGather(ctx, one, alloc); return err },
			"Scatter":   func() error { return d.Scatter(ctx, comm.BufOf(all), parts, 0, alloc) },
			"Alltoall": func() error {
				_, err := d.Alltoall(ctx, comm.BufOf(make([]int64, n)), parts, alloc)
				return err
			},
			"Igather":    func() error { return wait(d.Igather(one, last, alloc, nil)) },
			"Iallgather": func() error { return wait(d.Iallgather(one, alloc, nil)) },
			"Iscatter":   func() error { return wait(d.Iscatter(comm.BufOf(all), parts, 0, alloc)) },
			"Ialltoall":  func() error { return wait(d.Ialltoall(comm.BufOf(make([]int64, n)), parts, alloc, nil)) },
		}
		for _, what := range sortedKeys(calls) {
			err := calls[what]()
			var ae *comm.ArgError
			if !errors.As(err, &ae) || ae.Rank != last || !strings.Contains(ae.Detail, "nil") {
				return fmt.Errorf("%s with a nil Alloc on rank %d: got %v, want a *comm.ArgError naming rank %d and the nil Alloc", what, last, err, last)
			}
		}
		return nil
	})
}

// misuseCallCase has rank 0 make one collective and every other rank
// another, for pairs of calls that meet in the same agreement step: each
// rank's *comm.MismatchError names the call that rank made (a rank that
// called Dup was told "Split", rank 0's call, which misled whoever read
// its log) and lists what the ranks called.
func misuseCallCase(ctx context.Context, c comm.Comm) error {
	// The errors are returned after misuse's check of the duplicate, which
	// every rank takes part in.
	var wrong error
	err := misuse(ctx, c, func(d comm.Comm) error {
		me, n := d.Rank(), d.Size()
		if n == 1 {
			return nil
		}
		call := func(name string) error {
			switch name {
			case "Barrier":
				return d.Barrier(ctx)
			case "Bcast":
				return comm.Bcast(ctx, d, []float64{1}, 0)
			case "AllReduce":
				_, err := comm.AllReduce(ctx, d, []float64{1}, comm.Sum)
				return err
			case "Reduce":
				_, err := comm.Reduce(ctx, d, []float64{1}, comm.Sum, 0)
				return err
			case "Split", "Dup":
				var s comm.Comm
				var err error
				if name == "Split" {
					s, err = d.Split(ctx, 0, me)
				} else {
					s, err = d.Dup(ctx)
				}
				if err == nil {
					_ = s.Free()
					return fmt.Errorf("%s returned a communicator", name)
				}
				return err
			}
			panic("misuseCallCase: no call " + name)
		}
		pairs := [][2]string{
			{"Barrier", "Bcast"}, {"Bcast", "Barrier"},
			{"AllReduce", "Reduce"}, {"Reduce", "AllReduce"},
			{"Split", "Dup"}, {"Dup", "Split"},
			{"Bcast", "AllReduce"}, {"Barrier", "Split"},
		}
		// Every rank runs every pair, whatever it found: a rank that
		// returned at its first wrong error would leave the others
		// waiting in the next pair.
		var errs []error
		for _, p := range pairs {
			mine := p[1]
			if me == 0 {
				mine = p[0]
			}
			what := fmt.Sprintf("%s on rank 0, %s elsewhere (rank %d)", p[0], p[1], me)
			err := call(mine)
			var mm *comm.MismatchError
			if !errors.As(err, &mm) {
				errs = append(errs, fmt.Errorf("%s: got %v, want a *comm.MismatchError", what, err))
				continue
			}
			if mm.Op != mine {
				errs = append(errs, fmt.Errorf("%s: the error names %s, not the call this rank made, %s: %v", what, mm.Op, mine, err))
				continue
			}
			if want := "comm: " + mine + ": "; !strings.HasPrefix(err.Error(), want) {
				errs = append(errs, fmt.Errorf("%s: %q does not start with %q", what, err.Error(), want))
				continue
			}
			if want := fmt.Sprintf("call: rank 0 has %s, rank 1 has %s", p[0], p[1]); !strings.Contains(mm.Detail, want) {
				errs = append(errs, fmt.Errorf("%s: detail %q does not say %q", what, mm.Detail, want))
			}
		}
		wrong = errors.Join(errs...)
		return nil
	})
	return errors.Join(wrong, err)
}
