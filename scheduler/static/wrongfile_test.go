package static

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A compiled plan or a run record given where a schedule is expected
// (pzrun stm compile PLAN.stm) is JSON, hence YAML: Parse said what it
// is, not one problem per JSON key. Found in the stm user trial.
func TestParseSaysAPlanOrARunRecordIsNotASchedule(t *testing.T) {
	plan := compileString(t, threeClients)
	var pb bytes.Buffer
	require.NoError(t, WritePlan(&pb, plan))
	var rb bytes.Buffer
	require.NoError(t, WriteRun(&rb, &Run{Format: "pz-stm-run", Version: RunVersion, Plan: plan.Hash, Source: "test.yaml"}))
	for i, c := range []struct {
		src  []byte
		want string
	}{
		{pb.Bytes(), `p.stm:1: this is a compiled plan (format pz-stm, compiled from "test.yaml"), not a schedule: it needs no compiling; give it as it is to pzrun stm master, client or run, or compile its schedule (the .yaml)`},
		{rb.Bytes(), `p.stm:1: this is a run record (format pz-stm-run), not a schedule: read it with pzrun stm analyze, and compile the schedule (the .yaml) instead`},
	} {
		_, err := Parse(c.src, "p.stm")
		var list ErrorList
		require.True(t, errors.As(err, &list), "case %d: %v", i, err)
		assert.Len(t, list, 1, "case %d", i)
		assert.Equal(t, c.want, err.Error(), "case %d", i)
	}
}

// A run record given where a plan is expected (pzrun stm master
// RUN.json) was refused with `json: unknown field "plan"`; ReadPlan says
// what it is and what to give instead.
func TestReadPlanSaysARunRecordIsNotAPlan(t *testing.T) {
	var rb bytes.Buffer
	require.NoError(t, WriteRun(&rb, &Run{Format: "pz-stm-run", Version: RunVersion, Plan: "0123456789abcdef", Source: "test.yaml"}))
	_, err := ReadPlan(strings.NewReader(rb.String()))
	require.ErrorIs(t, err, ErrPlan)
	assert.Contains(t, err.Error(), "this is a run record (format pz-stm-run), not a plan: give the schedule's .yaml or the .stm that pzrun stm compile writes")
}
