package mpi

import "os"

// Option configures Init.
type Option func(*config)

type config struct {
	getenv    func(string) string
	check     *bool
	gomaxproc bool
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
// (PZ_COMM_CHECK).
func WithGetenv(getenv func(string) string) Option { return func(c *config) { c.getenv = getenv } }
