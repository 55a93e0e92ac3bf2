package resourceset

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/hardware"
)

// ErrInvalid is wrapped by the errors New and Exchange return for invalid
// arguments.
var ErrInvalid = errors.New("resourceset: invalid argument")

// A Root is a rank of a communicator, the root of the rooted collectives
// Gather, Reduce, Bcast and Scatter (and their value forms). *ResourceSet
// and *RAM are Roots.
type Root interface {
	// Comm is the communicator the rank belongs to.
	Comm() comm.Comm
	// Rank is the root's rank in Comm.
	Rank() int
}

var (
	_ Root = (*ResourceSet)(nil)
	_ Root = (*RAM)(nil)
)

// A ResourceSet is what one rank of a communicator has: the RAM, GPUs and
// CPU cores of its host. It can be asked for from any rank: the hardware
// description is that of the rank it stands for (exchanged once with
// Exchange), and its RAM is the root of collectives that gather to, reduce
// to, broadcast from and scatter from that rank.
//
// A ResourceSet is immutable and safe for concurrent use. Its figures are a
// snapshot taken when the description was discovered; free memory changes
// afterwards.
type ResourceSet struct {
	c    comm.Comm
	rank int
	m    *hardware.Machine
	ram  *RAM
	devs []*Device

	// The logger is made on first use: a program that looks at every
	// rank's resource set (the ranks on its host, say) would otherwise
	// hold one zap logger per pair of ranks with in-process ranks
	// (~1.4 KB each: 23 GB at 4,096 ranks).
	base    *zap.Logger
	logOnce sync.Once
	log     *zap.Logger
}

// New returns the resource set of rank on communicator c, described by m
// (the description of that rank's machine, which New does not copy: do not
// modify it afterwards). log is the calling process's local logger (it
// prints on every rank); a nil log discards. It returns an error wrapping
// ErrInvalid when c or m is nil or rank is out of range.
func New(c comm.Comm, rank int, m *hardware.Machine, log *zap.Logger) (*ResourceSet, error) {
	if c == nil || m == nil {
		return nil, fmt.Errorf("%w: nil communicator or machine", ErrInvalid)
	}
	if rank < 0 || rank >= c.Size() {
		return nil, fmt.Errorf("%w: rank %d out of range [0, %d)", ErrInvalid, rank, c.Size())
	}
	if log == nil {
		log = zap.NewNop()
	}
	rs := &ResourceSet{c: c, rank: rank, m: m, base: log}
	rs.ram = &RAM{c: c, rank: rank, mem: m.Memory}
	for i, a := range m.Accelerators {
		rs.devs = append(rs.devs, &Device{c: c, rank: rank, idx: i, info: a})
	}
	return rs, nil
}

// Exchange sends this rank's machine description to every rank of c and
// returns every rank's description, indexed by rank (this rank's entry is
// mine itself). It is a collective: every rank of c calls it, in the same
// order as other collectives on c. Build the resource sets from the result
// with New, when they are first needed.
//
// Ranks that share a machine often describe it alike, so the
// descriptions travel once per distinct one: the ranks first all-gather a
// digest of theirs (16 bytes each), then the first rank of each distinct
// digest sends its encoded description (a few KiB) and every rank decodes
// each distinct description once (its own, never); ranks with the same
// description share one *hardware.Machine in the result (mine itself for
// the ranks described as this one), which callers must not modify. (A
// RuntimeView's in-process ranks need no exchange: they share one table.)
func Exchange(ctx context.Context, c comm.Comm, mine *hardware.Machine) ([]*hardware.Machine, error) {
	if c == nil || mine == nil {
		return nil, fmt.Errorf("%w: nil communicator or machine", ErrInvalid)
	}
	// A status byte leads the description, so that a rank whose
	// description cannot be encoded still takes part and the others learn
	// why (its digest is that of its error text, so it sends it).
	blob := []byte{descOK}
	if b, err := comm.Encode(*mine); err != nil {
		blob = append([]byte{descFailed}, err.Error()...)
	} else {
		blob = append(blob, b...)
	}
	sum := sha256.Sum256(blob)
	var digests []byte
	if _, err := c.AllGather(ctx, comm.Buf{Bytes: sum[:digestSize], Type: comm.Uint8}, func(n int) []byte {
		digests = make([]byte, n)
		return digests
	}); err != nil {
		return nil, fmt.Errorf("resourceset: exchange hardware descriptions: %w", err)
	}
	n, me := c.Size(), c.Rank()
	if len(digests) != n*digestSize {
		return nil, fmt.Errorf("resourceset: exchange hardware descriptions: %d bytes of digests from %d ranks, want %d", len(digests), n, n*digestSize)
	}
	// first[r] is the lowest rank whose description has r's digest: the
	// one that sends it. Every rank computes the same.
	first := make([]int, n)
	seen := make(map[[digestSize]byte]int)
	for r := range n {
		d := [digestSize]byte(digests[r*digestSize:])
		f, ok := seen[d]
		if !ok {
			f = r
			seen[d] = r
		}
		first[r] = f
	}
	var send []byte
	if first[me] == me {
		send = blob
	}
	var all []byte
	counts, err := c.AllGather(ctx, comm.Buf{Bytes: send, Type: comm.Uint8}, func(n int) []byte {
		all = make([]byte, n)
		return all
	})
	if err != nil {
		return nil, fmt.Errorf("resourceset: exchange hardware descriptions: %w", err)
	}
	out := make([]*hardware.Machine, n)
	var errs []error
	off := 0
	for r, k := range counts {
		p := all[off : off+k]
		off += k
		switch {
		case first[r] != r:
			if k != 0 {
				errs = append(errs, fmt.Errorf("rank %d sent a description of %d bytes it shares with rank %d", r, k, first[r]))
			}
		case first[r] == first[me] && blob[0] == descOK:
			out[r] = mine // the same bytes as this rank's: no decoding
		case k == 0:
			errs = append(errs, fmt.Errorf("rank %d sent no description", r))
		case p[0] == descFailed:
			errs = append(errs, fmt.Errorf("rank %d: %s", r, p[1:]))
		default:
			m := new(hardware.Machine)
			if err := comm.Decode(p[1:], m); err != nil {
				errs = append(errs, fmt.Errorf("rank %d: %w", r, err))
				continue
			}
			out[r] = m
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("resourceset: exchange hardware descriptions: %w", err)
	}
	for r := range out {
		out[r] = out[first[r]]
	}
	out[me] = mine
	return out, nil
}

// The status byte that leads an encoded description in Exchange, and the
// bytes of each rank's digest.
const (
	descOK     byte = 0
	descFailed byte = 1
	digestSize      = 16
)

// Comm returns the communicator the resource set's rank belongs to.
// A nil resource set has none (nil).
func (rs *ResourceSet) Comm() comm.Comm {
	if rs == nil {
		return nil
	}
	return rs.c
}

// Rank returns the rank the resource set stands for.
func (rs *ResourceSet) Rank() int { return rs.rank }

// IsMine reports whether the resource set is the calling rank's own.
func (rs *ResourceSet) IsMine() bool { return rs.rank == rs.c.Rank() }

// Host returns the names of the rank's machine.
func (rs *ResourceSet) Host() hardware.Host { return rs.m.Host }

// CPU returns the rank's processors: logical and physical cores, sockets,
// NUMA nodes, caches, and the CPUs and cgroup quota the rank's process may
// use. The slices are copies.
func (rs *ResourceSet) CPU() hardware.CPU {
	c := rs.m.CPU
	c.NUMANodes = slices.Clone(c.NUMANodes)
	for i := range c.NUMANodes {
		c.NUMANodes[i].CPUs = slices.Clone(c.NUMANodes[i].CPUs)
		c.NUMANodes[i].Distances = slices.Clone(c.NUMANodes[i].Distances)
	}
	c.Caches = slices.Clone(c.Caches)
	for i := range c.Caches {
		c.Caches[i].Instances = slices.Clone(c.Caches[i].Instances)
		for j := range c.Caches[i].Instances {
			c.Caches[i].Instances[j] = slices.Clone(c.Caches[i].Instances[j])
		}
	}
	c.AllowedCPUs = slices.Clone(c.AllowedCPUs)
	return c
}

// RAM returns the rank's memory, which is also the root for collectives
// rooted at the rank.
func (rs *ResourceSet) RAM() *RAM { return rs.ram }

// GPUs returns the CUDA devices visible to the rank's process, in ordinal
// order; empty (not nil) when it has none. The slice is a copy.
func (rs *ResourceSet) GPUs() []hardware.GPU {
	return append([]hardware.GPU{}, rs.m.GPUs...)
}

// HasGPUs reports whether the rank's process sees at least one GPU.
func (rs *ResourceSet) HasGPUs() bool { return len(rs.m.GPUs) > 0 }

// Machine returns the full hardware description of the rank's machine,
// warnings included. It is shared: treat it as read-only.
func (rs *ResourceSet) Machine() *hardware.Machine { return rs.m }

// Logger returns the calling process's local logger: it prints on every
// rank, each line carrying the caller's rank. For another rank's resource
// set, lines also carry a "resource_set" field with that rank.
func (rs *ResourceSet) Logger() *zap.Logger {
	rs.logOnce.Do(func() {
		rs.log = rs.base
		if rs.rank != rs.c.Rank() {
			rs.log = rs.base.With(zap.Int("resource_set", rs.rank))
		}
	})
	return rs.log
}

// String describes the resource set in one line, e.g.
// "rank 2 on node7: 64 cores, 503.2 GiB RAM (498.1 GiB available), 4 GPUs".
func (rs *ResourceSet) String() string {
	return fmt.Sprintf("rank %d on %s: %d cores, %s RAM (%s available), %d GPUs",
		rs.rank, rs.m.Host.Hostname, rs.m.CPU.LogicalCores,
		gib(rs.ram.mem.TotalBytes), gib(rs.ram.mem.AvailableBytes), len(rs.m.GPUs))
}

func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// RAM is the memory of one rank's host, and the root for collectives rooted
// at that rank. It is immutable and safe for concurrent use.
type RAM struct {
	c    comm.Comm
	rank int
	mem  hardware.Memory
}

// Comm returns the communicator of the RAM's rank.
// A nil RAM has none (nil).
func (r *RAM) Comm() comm.Comm {
	if r == nil {
		return nil
	}
	return r.c
}

// Rank returns the rank whose RAM this is.
func (r *RAM) Rank() int { return r.rank }

// TotalBytes is the memory the rank's process can have: the host's
// MemTotal, lowered to its cgroup memory limit if one is set.
func (r *RAM) TotalBytes() uint64 { return r.mem.TotalBytes }

// AvailableBytes is the memory available to the rank's process when its
// hardware was discovered: the host's MemAvailable, lowered to the
// headroom under its cgroup limit if one is set.
func (r *RAM) AvailableBytes() uint64 { return r.mem.AvailableBytes }

// Memory returns the detailed figures: host totals and the cgroup limit
// and usage beside the effective ones.
func (r *RAM) Memory() hardware.Memory { return r.mem }
