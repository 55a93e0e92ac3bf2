package dist

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/pzgo/pz/comm"
)

// askWait bounds how long a rank that stalled in a collective waits for
// the other ranks to say how far they got (askPeers): long enough for a
// rank whose progress goroutine runs to answer, short next to the stall
// timeout it adds to.
const askWait = time.Second

// askPeers asks the other ranks how far they got (ctrlAsk) when this
// rank stalled waiting for them in step of the graph check (graphCheck)
// or in the agreement on WaitAll's outcome (agreementStep), waits at
// most min(askWait, the stall timeout) for their answers, and says which
// ranks have not started that step and what they are doing, and which
// did not answer. A rank answers from its progress goroutine, so also
// while its workers are busy or its program is elsewhere.
func (d *Scheduler) askPeers(step int) string {
	if d.size < 2 {
		return ""
	}
	answers, bound := d.askAll()
	return d.describeAnswers(step, answers, bound)
}

// askAll asks the other ranks how far they got (ctrlAsk) and returns
// their answers, by rank, once all have answered or after bound, the
// longest it waits (min(askWait, the stall timeout)).
func (d *Scheduler) askAll() (answers map[int]peerState, bound time.Duration) {
	answer := make(chan struct{}, 1)
	d.failMu.Lock()
	d.asked++
	id := d.asked
	d.answers, d.answer = map[int]peerState{}, answer
	d.failMu.Unlock()
	d.announce(binary.LittleEndian.AppendUint64([]byte{ctrlAsk}, id), "")
	bound = askWait
	if d.timeout > 0 {
		bound = min(bound, d.timeout)
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	for {
		d.failMu.Lock()
		n := len(d.answers)
		d.failMu.Unlock()
		if n >= d.size-1 {
			break
		}
		select {
		case <-answer:
			continue
		case <-t.C:
		}
		break
	}
	d.failMu.Lock()
	answers = d.answers
	d.answers, d.answer = nil, nil
	d.failMu.Unlock()
	return answers, bound
}

// describeAnswers says, from the other ranks' answers (askAll, which
// waited at most bound), which have not started step and what they are
// doing, and which did not answer.
func (d *Scheduler) describeAnswers(step int, answers map[int]peerState, bound time.Duration) string {

	what := "this comparison of the ranks' graphs"
	switch {
	case step == agreementStep:
		what = "this agreement on the outcome of WaitAll"
	case step%2 == 1:
		what = "this exchange of the ranks' submissions"
	}
	mine := int(d.pos.agreements.Load())
	var out, silent []string
	for r := range d.size {
		if r == d.rank {
			continue
		}
		a, ok := answers[r]
		switch {
		case !ok:
			silent = append(silent, fmt.Sprint(r))
		case step == agreementStep && a.agreements < mine, step != agreementStep && a.reached <= step:
			out = append(out, fmt.Sprintf("rank %d has not reached %s: it is %s", r, what, a.text))
		}
	}
	if len(silent) > 0 {
		out = append(out, fmt.Sprintf("rank %s did not answer within %v (hung, or its link cut?)", strings.Join(silent, ", "), bound))
	}
	if len(out) == 0 {
		return fmt.Sprintf("every rank has reached %s, yet it did not complete", what)
	}
	return strings.Join(out, "; ")
}

// tell answers a rank's question (ctrlAsk, number id) with how far this
// rank got (ctrlTell). It runs on the progress goroutine: it reads only
// d.pos and, under failMu, the transfers in flight.
func (d *Scheduler) tell(to int, id []byte) {
	d.failMu.Lock()
	xfers := len(d.xfers)
	d.failMu.Unlock()
	where := "not in WaitAll"
	switch d.pos.phase.Load() {
	case phaseComparing:
		where = "in WaitAll, comparing the graphs"
	case phaseTasks:
		where = "in WaitAll, waiting for its tasks"
	case phaseAgreeing:
		where = "in WaitAll, agreeing on the outcome"
	}
	text := fmt.Sprintf("at submission %d, %s, %d tasks not done, %d transfers in flight",
		d.pos.submitted.Load(), where, d.pos.open.Load(), xfers)
	msg := append([]byte{ctrlTell}, id...)
	msg = binary.LittleEndian.AppendUint64(msg, uint64(d.pos.reached.Load()))
	msg = binary.LittleEndian.AppendUint64(msg, uint64(d.pos.agreements.Load()))
	msg = append(msg, text[:min(len(text), ctrlSize-len(msg))]...)
	if req, err := d.c.Isend(comm.Buf{Bytes: msg, Type: comm.Uint8}, to, ctrlTag); err == nil {
		d.prog.add(req, func(comm.Status, error) {})
	}
}

// heard records rank from's answer (ctrlTell, msg) to this rank's last
// question; an answer to an earlier one is dropped.
func (d *Scheduler) heard(from int, msg []byte) {
	id := binary.LittleEndian.Uint64(msg[1:9])
	word := func(i int) int { return int(min(binary.LittleEndian.Uint64(msg[i:i+8]), math.MaxInt)) }
	d.failMu.Lock()
	defer d.failMu.Unlock()
	if d.answers == nil || id != d.asked {
		return
	}
	d.answers[from] = peerState{reached: word(9), agreements: word(17), text: string(msg[ctrlTellHead:])}
	select {
	case d.answer <- struct{}{}:
	default:
	}
}
