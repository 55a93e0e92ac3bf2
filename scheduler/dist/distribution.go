package dist

import (
	"fmt"

	"github.com/pzgo/pz/internal/plural"
)

// A Distribution maps the tiles of a grid to the ranks that own them.
type Distribution interface {
	// Owner is the rank that owns tile (i, j).
	Owner(i, j int) int
	// Check reports whether the distribution fits a communicator of size
	// ranks, naming what does not.
	Check(size int) error
}

// BlockCyclic2D is ScaLAPACK's 2D block-cyclic distribution on a P x Q
// process grid in row-major rank order: tile (i, j) belongs to rank
// (i mod P)*Q + (j mod Q). P*Q must equal the rank count.
func BlockCyclic2D(p, q int) Distribution { return blockCyclic{p, q} }

type blockCyclic struct{ p, q int }

func (b blockCyclic) Owner(i, j int) int { return (i%b.p)*b.q + j%b.q }

func (b blockCyclic) Check(size int) error {
	if b.p < 1 || b.q < 1 || b.p*b.q != size {
		return fmt.Errorf("%w: a %d x %d process grid for %s: P*Q must equal the rank count (dist.Grid(n) gives the most square P x Q for n ranks)", ErrDistribution, b.p, b.q, plural.Of(size, "rank"))
	}
	return nil
}

// Cyclic1D deals tiles to ranks round robin in row-major tile order over a
// grid of nt tile columns: tile (i, j) belongs to rank (i*nt + j) mod size.
// RegisterTiles refuses it for a grid whose tile columns are not nt.
func Cyclic1D(nt, size int) Distribution { return cyclic1D{nt, size} }

type cyclic1D struct{ nt, size int }

func (c cyclic1D) Owner(i, j int) int { return (i*c.nt + j) % c.size }

func (c cyclic1D) Check(size int) error {
	if c.size != size || c.nt < 1 {
		return fmt.Errorf("%w: a 1D cyclic distribution over %s (%d tile columns) used with %s", ErrDistribution, plural.Of(c.size, "rank"), c.nt, plural.Of(size, "rank"))
	}
	return nil
}

// checkGrid refuses a grid whose tile columns are not the ones c deals
// over: its owners would follow another grid's row-major order (over 3
// columns, a 4-column grid's columns would be dealt cyclically).
func (c cyclic1D) checkGrid(mt, nt int) error {
	if c.nt != nt {
		return fmt.Errorf("%w: Cyclic1D(%d, %d) deals tiles over %d tile columns, but the grid has %d (%d x %d tiles): pass Cyclic1D(%d, %d), the grid's tile columns", ErrDistribution, c.nt, c.size, c.nt, nt, mt, nt, nt, c.size)
	}
	return nil
}

// gridChecker is a distribution made for one grid's shape, which
// RegisterTiles checks.
type gridChecker interface {
	checkGrid(mt, nt int) error
}

// Func is a distribution given by a function; every rank must pass the
// same one. RegisterTiles refuses an owner outside [0, size) (ErrBadRank,
// naming the tile) before it registers any tile.
func Func(owner func(i, j int) int) Distribution { return funcDist(owner) }

type funcDist func(i, j int) int

func (f funcDist) Owner(i, j int) int { return f(i, j) }

func (f funcDist) Check(int) error {
	if f == nil {
		return fmt.Errorf("%w: Func(nil): the distribution needs an owner function", ErrDistribution)
	}
	return nil
}

// Grid returns the most square P x Q process grid with P <= Q for size
// ranks (P*Q == size), as ScaLAPACK users choose.
func Grid(size int) (p, q int) {
	p = 1
	for d := 1; d*d <= size; d++ {
		if size%d == 0 {
			p = d
		}
	}
	return p, size / p
}
