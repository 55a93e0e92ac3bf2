//go:build mpi

package mpi

/*
#include "pz_mpi.h"
#include "pz_agree.h"
*/
import "C"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"github.com/pzgo/pz/comm"
)

// The agreement step and argument checks of the collectives.

// argErr is a local validation failure.
func (c *Comm) argErr(call call, format string, args ...any) error {
	return &comm.ArgError{Op: call.String(), Rank: c.rank, Detail: fmt.Sprintf(format, args...)}
}

// alone is lerr, or on one rank the error of a ctx that has ended, where
// a collective may make no MPI call (a Bcast, a Gather's counts): the
// same as startAndPoll's, which every collective on more ranks, and
// comm/local's on any number, returns; it breaks c, as abandoning the
// collective on more ranks does.
func (c *Comm) alone(ctx context.Context, lerr error) error {
	if lerr != nil || c.size != 1 || ctx.Err() == nil {
		return lerr
	}
	return fmt.Errorf("mpi: %w", c.breakWith(ctxErr(ctx)))
}

// collErr is the error of collective k on this rank, err, when MPI or
// the context ended it: it names the call the program made and the rank,
// as argErr's errors, the point-to-point calls' (p2pErr) and comm/local's
// do, where err names only an MPI function (MPI_Allreduce) or k's
// agreement step. nil, an *ArgError and a *MismatchError (which name the
// call already) are returned as they are; the rest stays wrapped. Kept
// small so that the compiler inlines it into the fast paths.
func (c *Comm) collErr(k call, err error) error {
	if err == nil {
		return nil
	}
	return c.callErr(k.String(), err)
}

// callErr is collErr for the call named name.
func (c *Comm) callErr(name string, err error) error {
	var ae *comm.ArgError
	var me *comm.MismatchError
	if err == nil || errors.As(err, &ae) || errors.As(err, &me) {
		return err
	}
	msg := err.Error()
	head := fmt.Sprintf("mpi: %s on rank %d: ", name, c.rank)
	if strings.HasPrefix(msg, head) {
		return err // named already (usable)
	}
	for strings.HasPrefix(msg, "mpi: ") {
		msg = msg[len("mpi: "):] // said once, in front
	}
	return &callError{msg: fmt.Sprintf("mpi: %s on rank %d: %s", name, c.rank, msg), err: err}
}

// callError is callErr's error: err under a message that names the call.
type callError struct {
	msg string
	err error
}

func (e *callError) Error() string { return e.msg }
func (e *callError) Unwrap() error { return e.err }

// pre runs before a collective whose arguments need no count exchange: with
// the check on it is the agreement step; with it off, or on one rank, a
// local validation failure is returned as is, and on one rank a ctx that
// has ended (alone).
func (c *Comm) pre(ctx context.Context, d desc, lerr error) error {
	_, err := c.preVolume(ctx, d, lerr, 0)
	return err
}

// preVolume is pre for a collective whose ranks send different amounts:
// with the agreement step it also returns the largest volume any rank
// passed (-1 when there was no agreement step).
func (c *Comm) preVolume(ctx context.Context, d desc, lerr error, volume int64) (int64, error) {
	if !c.check || c.size == 1 {
		return -1, c.alone(ctx, lerr)
	}
	in, out := &c.agree[0], &c.agree[1]
	setHeader(in, agreeVector(d, c.rank, c.size, lerr, volume))
	in.pay = 0
	if err := c.agreeStep(ctx, d.call); err != nil {
		return -1, err
	}
	failRank, same := agreed(header(out), c.size)
	if failRank < 0 && same {
		return int64(out.h[3]), nil
	}
	return -1, c.explain(ctx, d, failRank, lerr)
}

// fused runs the agreement step of a collective of at most agreePayload
// bytes with the operation itself riding in its payload: one
// MPI_Allreduce where check-then-operate takes two (an 8-byte AllReduce:
// ~1.0 µs -> ~0.55 µs on 2 ranks). pay is the payload's code (payCode,
// bcastCode; 0 for none), send what this rank contributes (root's buffer
// for a Bcast; nothing elsewhere) and recv where the result goes. done
// reports that recv holds the result (or err is set); when it is false
// the caller runs the collective as usual, after an agreement that
// passed. Every rank sends the same element whatever it passes, so ranks
// that disagree on the call still make matching MPI calls. With the check
// off, or on one rank, it is pre: done only with this rank's own error.
func (c *Comm) fused(ctx context.Context, d desc, lerr error, pay int64, send, recv []byte) (done bool, err error) {
	if !c.check || c.size == 1 {
		lerr = c.alone(ctx, lerr)
		return lerr != nil, lerr
	}
	c.setAgree(d, lerr, pay, send != nil)
	if c.collBlocks(ctx) {
		// The whole step in one C call: the payload's copies in and out,
		// the watch's stores and MPI_Allreduce (agreeBlocking).
		if done, err := c.agreeBlocking(d.call, send, recv, int(pay&0xffff)); done {
			return true, err
		}
	} else {
		if c.agree[0].pay != 0 {
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&c.agree[0].payload[0])), agreePayload), send)
		}
		if err := c.agreeStep(ctx, d.call); err != nil {
			return true, err
		}
	}
	return c.fusedResult(ctx, d, lerr, pay, recv)
}

// setAgree sets c.agree[0]'s header and payload code for fused: the
// agreement vector (agreeVector(d, c.rank, c.size, lerr, 0), stored word
// by word: the array's copies on the stack stalled store forwarding), the
// code when this rank's arguments are valid, and the root flag of a Bcast
// where this rank sends (sends).
func (c *Comm) setAgree(d desc, lerr error, pay int64, sends bool) {
	in := &c.agree[0]
	fp, fail := d.hash(), int64(0)
	if lerr != nil {
		fail, pay = int64(c.size-c.rank), 0
	}
	in.h[0], in.h[1], in.h[2], in.h[3] = C.int64_t(fp), C.int64_t(-fp), C.int64_t(fail), 0
	in.pay, in.root = C.int64_t(pay), 0
	if pay != 0 && sends {
		in.root = C.int64_t(b2i(pay>>24 == C.PZ_AGREE_BCAST))
	}
}

// fusedResult interprets the reduced element of fused's agreement step
// (c.agree[1]): an error on every rank when one failed or they disagree;
// otherwise done with the payload copied to recv when it was combined.
func (c *Comm) fusedResult(ctx context.Context, d desc, lerr error, pay int64, recv []byte) (done bool, err error) {
	in, out := &c.agree[0], &c.agree[1]
	failRank, same := agreed(header(out), c.size)
	if failRank >= 0 || !same {
		return true, c.explain(ctx, d, failRank, lerr)
	}
	if in.pay == 0 || out.pay != in.pay {
		return false, nil // not carried (or not combined): go on as usual
	}
	copy(recv, unsafe.Slice((*byte)(unsafe.Pointer(&out.payload[0])), pay&0xffff))
	return true, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// agreeGather is the agreement step of a Gather or AllGather on at most
// agreePayload/8 ranks with every rank's element count, and its data when
// small enough, riding in the payload: rank r fills slot r (a count word,
// then up to slot-8 bytes of data) and leaves the rest zero, and the
// payloads combine with a bitwise or. So the count exchange costs no MPI
// call of its own, and when every rank's data fit its slot (2 ranks: 24
// bytes each; 4 ranks: 8 bytes) neither does the data: then inline is
// true and c.gathered copies it out.
//
// tried is false when it does not apply (check off, one rank, more ranks);
// then the caller runs the agreement and the count exchange as usual.
// Otherwise counts holds every rank's count on every rank, or err is set.
func (c *Comm) agreeGather(ctx context.Context, d desc, lerr error, send comm.Buf) (counts []int, inline, tried bool, err error) {
	if !c.check || c.size < 2 || c.size*8 > agreePayload {
		return nil, false, false, nil
	}
	slot := c.gatherSlot()
	var mine [agreePayload]byte
	n := send.Len()
	binary.LittleEndian.PutUint64(mine[c.rank*slot:], uint64(n))
	if len(send.Bytes) <= slot-8 {
		copy(mine[c.rank*slot+8:], send.Bytes)
	}
	// Every rank passes this same code, so when the ranks agree the
	// payload is always combined: fused is done.
	if _, err := c.fused(ctx, d, lerr, payCode(comm.Uint64, comm.BOr, agreePayload), mine[:], nil); err != nil {
		return nil, false, true, err
	}
	all := c.payload()
	counts = make([]int, c.size)
	inline = true
	for r := range counts {
		counts[r] = int(binary.LittleEndian.Uint64(all[r*slot:]))
		inline = inline && counts[r]*send.Type.Size() <= slot-8
	}
	return counts, inline, true, nil
}

// agreeBlocks is agreeGather for AllGatherBlockBuf, whose count every
// rank knows (it is in d, which the step checks): the slots carry data
// only, agreePayload/Size bytes each (2 ranks: 32 bytes; 8 ranks: 8), from
// an array of c's own, so that nothing is allocated. inline reports that
// every block fit its slot and now is in recv; tried and err are as
// agreeGather's.
func (c *Comm) agreeBlocks(ctx context.Context, d desc, lerr error, send, recv []byte) (inline, tried bool, err error) {
	if !c.check || c.size < 2 || c.size*8 > agreePayload {
		return false, false, nil
	}
	slot, n := c.gatherSlot(), len(send)
	fits := n <= slot // the same on every rank that agrees
	clear(c.blockPay[:])
	if fits {
		copy(c.blockPay[c.rank*slot:], send)
	}
	if _, err := c.fused(ctx, d, lerr, payCode(comm.Uint64, comm.BOr, agreePayload), c.blockPay[:], nil); err != nil || !fits {
		return false, true, err
	}
	all := c.payload()
	for r := range c.size {
		copy(recv[r*n:(r+1)*n], all[r*slot:])
	}
	return true, true, nil
}

// gatherSlot is the bytes of each rank's slot in agreeGather's payload.
func (c *Comm) gatherSlot() int { return agreePayload / c.size &^ 7 }

// payload is the combined payload of the last agreement step; it stays
// until the next one (c.coll is held).
func (c *Comm) payload() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&c.agree[1].payload[0])), agreePayload)
}

// gathered copies every rank's data from the payload of an agreeGather
// that returned inline into out, in rank order.
func (c *Comm) gathered(out []byte, counts []int, dt comm.Datatype) {
	all, slot, off := c.payload(), c.gatherSlot(), 0
	for r, n := range counts {
		off += copy(out[off:], all[r*slot+8:r*slot+8+n*dt.Size()])
	}
}

// agreePayload is the most bytes an AllReduce carries in its agreement
// step: the step costs every collective the same whatever it carries, and
// 64 bytes keep it within a cache line's worth of payload.
const agreePayload = C.PZ_AGREE_PAYLOAD

// payCode describes a reduction that can ride in the agreement step, as
// pz_agree_fn decodes it (type<<24 | op<<16 | bytes), or 0 when it cannot:
// too large, complex, a user op, or no data.
func payCode(dt comm.Datatype, op comm.Op, nbytes int) int64 {
	if nbytes == 0 || nbytes > agreePayload || dt < comm.Int8 || dt > comm.Float64 || !op.Valid() || !op.Supports(dt) {
		return 0
	}
	return int64(dt)<<24 | int64(op)<<16 | int64(nbytes)
}

// bcastCode describes a Bcast of nbytes riding in the agreement step, or
// is 0 when it cannot.
func bcastCode(nbytes int) int64 {
	if nbytes == 0 || nbytes > agreePayload {
		return 0
	}
	return C.PZ_AGREE_BCAST<<24 | int64(nbytes)
}

func setHeader(e *C.pz_agree_t, v [agreeWords]int64) {
	for i, w := range v {
		e.h[i] = C.int64_t(w)
	}
}

func header(e *C.pz_agree_t) (v [agreeWords]int64) {
	for i := range v {
		v[i] = int64(e.h[i])
	}
	return v
}

// combinePayload runs pz_agree_fn on two elements carrying a and b (at
// most agreePayload bytes each) as AllReduce payloads of dt and op, and
// returns b combined with a and whether the payload was combined; tests
// compare it with comm.ReduceInto (cgo cannot be used in test files).
func combinePayload(dt comm.Datatype, op comm.Op, a, b []byte) ([]byte, bool) {
	var in, inout C.pz_agree_t
	in.pay = C.int64_t(payCode(dt, op, len(a)))
	inout.pay = C.int64_t(payCode(dt, op, len(b)))
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&in.payload[0])), agreePayload), a)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&inout.payload[0])), agreePayload), b)
	C.pz_agree_combine(&in, &inout)
	return unsafe.Slice((*byte)(unsafe.Pointer(&inout.payload[0])), len(b)), inout.pay != 0
}

// agreeNames names the agreement step of each collective, for the stall
// watch's reports and MPI's errors: a rank that waits in it waits for
// the user's call (Barrier, ...) on another rank, not for an
// MPI_Allreduce of its own. Made once, so that naming a step stores a
// constant string.
var agreeNames = func() (names [256]string) {
	for i := range names {
		names[i] = call(i).String() + "'s agreement step (MPI_Allreduce)"
	}
	return names
}()

// agreeStep allreduces c.agree[0] into c.agree[1] with pz_agree_op, the
// agreement step of collective k.
// The buffers are c's own (c.agree, alive as long as c) and pinned by
// c.do on the polling path, so they go to C as addresses (pz_allreduce_at).
func (c *Comm) agreeStep(ctx context.Context, k call) error {
	sp, rp := unsafe.Pointer(&c.agree[0]), unsafe.Pointer(&c.agree[1])
	sa, ra := C.uintptr_t(uintptr(sp)), C.uintptr_t(uintptr(rp))
	dt, op := c.st.agreeType, c.st.agreeOp
	err := c.do(ctx, agreeNames[k], true,
		func() C.int { return C.pz_allreduce_at(sa, ra, 1, dt, op, c.c, 0) },
		func(r *C.MPI_Request) C.int { return C.pz_iallreduce_at(sa, ra, 1, dt, op, c.c, r) }, sp, rp)
	runtime.KeepAlive(c.agree)
	return err
}

// agreeBlocking is the blocking agreement step of fused, in one cgo call
// (pz_agree_step) with no pointer for cgo to check: c.agree's header and
// code are set; send's bytes go into the payload when it carries one (in.pay
// set). It reports done when the step failed (err) or the ranks agreed and
// the payload came back combined into recv (n bytes at most); otherwise
// c.agree[1] holds the reduced element for fused to interpret.
func (c *Comm) agreeBlocking(k call, send, recv []byte, n int) (done bool, err error) {
	in := &c.agree[0]
	sn := 0
	if in.pay != 0 {
		sn = min(len(send), agreePayload)
	}
	rn := min(len(recv), n)
	slot := c.collSlotU(agreeNames[k])
	rc := C.pz_agree_step(C.uintptr_t(uintptr(unsafe.Pointer(in))), C.uintptr_t(uintptr(ptr(send))), C.int(sn),
		C.uintptr_t(uintptr(ptr(recv))), C.int(rn), slot, C.uint64_t(c.seq), c.st.agreeTypeU, c.st.agreeOpU, c.cu)
	runtime.KeepAlive(send) // C had their addresses
	runtime.KeepAlive(recv)
	runtime.KeepAlive(c.wslot)
	yieldEvery(c.seq)
	switch {
	case rc == 0:
		return true, nil
	case rc > 0:
		return true, fmt.Errorf("mpi: %w", c.st.error(agreeNames[k], rc))
	}
	return false, nil
}

// explain runs on every rank once the agreement step found a failure or a
// mismatch, and turns it into the same error everywhere: the failing rank's
// ArgError (its detail is broadcast), or a MismatchError built from every
// rank's descriptor.
func (c *Comm) explain(ctx context.Context, d desc, failRank int, lerr error) error {
	if failRank >= 0 {
		const maxDetail = 512 // bytes of the failing rank's message sent to all
		buf := make([]byte, maxDetail)
		if c.rank == failRank && lerr != nil {
			msg := lerr.Error()
			if ae := (*comm.ArgError)(nil); errors.As(lerr, &ae) {
				msg = ae.Detail
			}
			copy(buf, msg)
		}
		bp := ptr(buf)
		err := c.do(ctx, "MPI_Bcast", true,
			func() C.int { return C.pz_bcast(bp, maxDetail, c.h.byte, C.int(failRank), c.c) },
			func(r *C.MPI_Request) C.int { return C.pz_ibcast(bp, maxDetail, c.h.byte, C.int(failRank), c.c, r) }, bp)
		if err != nil {
			return fmt.Errorf("%w: mpi: %s: rank %d passed an invalid argument; sending its message failed: %w", comm.ErrInvalidArg, d.call, failRank, err)
		}
		n := 0
		for n < len(buf) && buf[n] != 0 {
			n++
		}
		return &comm.ArgError{Op: d.name(), Rank: failRank, Detail: string(buf[:n])}
	}
	w := d.words()
	all := make([][descWords]uint64, c.size)
	sp, rp := unsafe.Pointer(&w[0]), unsafe.Pointer(&all[0][0])
	err := c.do(ctx, "MPI_Allgather", true,
		func() C.int { return C.pz_allgather(sp, descWords, rp, descWords, c.h.i64, c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_iallgather(sp, descWords, rp, descWords, c.h.i64, c.c, r) }, sp, rp)
	if err != nil {
		return fmt.Errorf("%w: mpi: %s: collecting the differing arguments failed: %w", comm.ErrMismatch, d.call, err)
	}
	return mismatch(d, all)
}

// checkBuf validates a buffer (comm.CheckBuf, as on comm/local); what
// names it. Counts past MPI's int go too (large.go).
func (c *Comm) checkBuf(k call, what string, b comm.Buf) error {
	return comm.CheckBuf(k.String(), c.rank, b)
}

func (c *Comm) checkRoot(k call, root int) error {
	return comm.CheckRoot(k.String(), c.rank, root, c.size)
}

func (c *Comm) checkReduce(k call, send, recv comm.Buf, op comm.Op, wantRecv bool) (inplace C.int, lerr error) {
	if err := c.checkBuf(k, "send", send); err != nil {
		return 0, err
	}
	if op != comm.User && !op.Supports(send.Type) { // a user op: comm.CheckUser
		return 0, c.argErr(k, "reduction %v is not defined on %v", op, send.Type)
	}
	if !wantRecv {
		return 0, nil
	}
	if recv.Type != send.Type {
		return 0, c.argErr(k, "recv datatype %v differs from send datatype %v", recv.Type, send.Type)
	}
	if len(recv.Bytes) != len(send.Bytes) {
		return 0, c.argErr(k, "receive buffer holds %d elements, send buffer %d", recv.Len(), send.Len())
	}
	if err := comm.CheckAlias(k.String(), c.rank, send, recv); err != nil {
		return 0, err
	}
	if comm.InPlace(send, recv) {
		return 1, nil // MPI_IN_PLACE
	}
	return 0, nil
}
