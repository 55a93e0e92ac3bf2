package mpi

import (
	"fmt"
	"os"
	"time"
)

// Option configures Init.
type Option func(*config)

type config struct {
	getenv          func(string) string
	check           *bool
	blocking        *bool
	gomaxproc       bool
	report, timeout *time.Duration
	// initFault, for tests (export_test.go), fails Init at a step with
	// the error it returns.
	initFault func(step string) error
}

// fault is the error a test chose for Init's step, or nil.
func (c config) fault(step string) error {
	if c.initFault == nil {
		return nil
	}
	return c.initFault(step)
}

func newConfig(opts []Option) config {
	c := config{getenv: os.Getenv, gomaxproc: true}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// checkEnabled resolves the mismatch check: an explicit WithCheck wins,
// then PZ_COMM_CHECK=0 (or "false", "off") disables it; it is on by default.
func (c config) checkEnabled() bool {
	if c.check != nil {
		return *c.check
	}
	switch c.getenv("PZ_COMM_CHECK") {
	case "0", "false", "off", "no":
		return false
	}
	return true
}

// blockingEnabled resolves the form of the collectives (WithBlocking): an
// explicit option wins, then PZ_COMM_BLOCKING=1 (or "true", "on", "yes")
// turns the blocking form on; it is off by default.
func (c config) blockingEnabled() bool {
	if c.blocking != nil {
		return *c.blocking
	}
	switch c.getenv("PZ_COMM_BLOCKING") {
	case "1", "true", "on", "yes":
		return true
	}
	return false
}

// WithBlocking chooses the MPI functions of every collective on the World
// and the communicators made from it, overriding the PZ_COMM_BLOCKING
// environment variable. MPI matches a blocking collective only with the
// same blocking collective on the other ranks (MPI_Allreduce never
// matches MPI_Iallreduce), so the form is the communicator's, the same on
// every rank whatever context each passes; every rank must give the same
// setting.
//
// Off (the default), every collective starts MPI's non-blocking function
// and waits for it: with MPI_Wait when ctx cannot end (context.Background),
// otherwise by polling MPI_Test until it completes or ctx ends. On, every
// collective calls MPI's blocking function: ctx is looked at before each
// MPI call, but not inside one, so a rank that never arrives keeps the
// others waiting until WithTimeout (PZ_COMM_TIMEOUT) ends the job. The
// blocking form costs less for small messages: an 8-byte AllReduce took
// about half the time (see the package doc, "# Context"). On an MPI at
// MPI_THREAD_SERIALIZED collectives are always polled.
func WithBlocking(on bool) Option { return func(c *config) { c.blocking = &on } }

// WithCheck turns the cross-rank argument check of every collective on or
// off, overriding the PZ_COMM_CHECK environment variable. With the check
// (the default) each collective starts with one small agreement step, so a
// call whose datatype, count, op or root differ across ranks, or whose
// arguments are invalid on any rank, returns an error on every rank. Without
// it invalid arguments are still caught on the rank that passed them, but
// the other ranks may block or get an MPI error.
func WithCheck(on bool) Option { return func(c *config) { c.check = &on } }

// WithGOMAXPROCS controls whether Init sizes GOMAXPROCS to this rank's share
// of the node with internal/procs (default true). The GOMAXPROCS
// environment variable always wins.
func WithGOMAXPROCS(on bool) Option { return func(c *config) { c.gomaxproc = on } }

// WithGetenv replaces os.Getenv for the variables Init reads
// (PZ_COMM_CHECK, PZ_COMM_BLOCKING, PZ_COMM_REPORT, PZ_COMM_TIMEOUT).
func WithGetenv(getenv func(string) string) Option { return func(c *config) { c.getenv = getenv } }

// WithStallReport sets how often a process says on stderr which MPI
// operation it has been waiting in, and for how long, while one blocks
// (default 1m; 0 turns the reports off): a collective, or a send,
// receive, probe or request Wait that blocks or polls (not a wait
// through a request's Done channel, as comm.WaitAny's). Environment:
// PZ_COMM_REPORT.
func WithStallReport(every time.Duration) Option { return func(c *config) { c.report = &every } }

// WithTimeout ends the process (status TimeoutExit, which makes mpirun
// end the job) when one MPI operation has waited for d, after saying on
// stderr which one (the call, the collective's number on its
// communicator; a point-to-point call's peer and tag) - a rank that left
// early or called another collective would otherwise hang the job
// forever. The operations are those WithStallReport reports, so d must
// exceed the longest a rank waits for a message legitimately (a worker
// waiting for its next task). 0 (the default) waits forever.
// Environment: PZ_COMM_TIMEOUT; pzrun's -comm-timeout flag sets it.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = &d } }

// watchDurations resolves the stall report interval and the timeout.
func (c config) watchDurations() (report, timeout time.Duration, err error) {
	report = time.Minute
	if c.report != nil {
		report = *c.report
	} else if v := c.getenv("PZ_COMM_REPORT"); v != "" {
		if report, err = time.ParseDuration(v); err != nil || report < 0 {
			return 0, 0, fmt.Errorf("%w: PZ_COMM_REPORT=%q: want a duration such as 30s, or 0 for no reports", ErrOption, v)
		}
	}
	if c.timeout != nil {
		timeout = *c.timeout
	} else if v := c.getenv("PZ_COMM_TIMEOUT"); v != "" {
		if timeout, err = time.ParseDuration(v); err != nil || timeout < 0 {
			return 0, 0, fmt.Errorf("%w: PZ_COMM_TIMEOUT=%q: want a duration such as 10m, or 0 to wait forever", ErrOption, v)
		}
	}
	if report < 0 || timeout < 0 {
		return 0, 0, fmt.Errorf("%w: negative stall report interval or timeout", ErrOption)
	}
	return report, timeout, nil
}

// TimeoutExit is the exit status of a process that WithTimeout (or
// PZ_COMM_TIMEOUT) ends: 124, as timeout(1)'s, so that mpirun ends the
// job. Defined in every build, as the rest of the API.
const TimeoutExit = 124
