package dist

import (
	"fmt"
	"strings"

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
// (i mod P)*Q + (j mod Q). P*Q must equal the rank count: a grid of more
// ranks, or fewer, than the communicator has is refused
// (ErrDistribution).
//
// A grid of tiles with fewer tile rows than P, or fewer tile columns
// than Q (a 4 x 1 grid for a matrix of 2 x 8 tiles), leaves some ranks
// without a tile of it: the tasks that write its tiles run on the
// others only. That is not an error (a vector of tiles on a P x Q grid
// is laid out so in ScaLAPACK), but RegisterTiles and
// RegisterMatrixTiles warn on rank 0, through the report function
// (WithStallReport; runtimeview.Scheduler logs it), naming the grid,
// the tiles, the idle ranks and a grid that would use every rank.
func BlockCyclic2D(p, q int) Distribution { return blockCyclic{p, q} }

type blockCyclic struct{ p, q int }

func (b blockCyclic) Owner(i, j int) int { return (i%b.p)*b.q + j%b.q }

func (b blockCyclic) Check(size int) error {
	if b.p < 1 || b.q < 1 || b.p*b.q != size {
		return fmt.Errorf("%w: a %d x %d process grid for %s: P*Q must equal the rank count (dist.Grid(n) gives the most square P x Q for n ranks)", ErrDistribution, b.p, b.q, plural.Of(size, "rank"))
	}
	return nil
}

// idleRanks returns the ranks that own no tile of an mt x nt grid of
// tiles, in increasing order: those of process rows mt.. and process
// columns nt.. . b fits the ranks (Check).
func (b blockCyclic) idleRanks(mt, nt int) []int {
	var idle []int
	for r := range b.p * b.q {
		if r/b.q >= mt || r%b.q >= nt {
			idle = append(idle, r)
		}
	}
	return idle
}

// idleWarning returns the warning for an mt x nt grid of tiles (of a
// rows x cols matrix) that leaves ranks of b without a tile, or "".
// name is the grid's name (scheduler.Named), call the registering call.
func (b blockCyclic) idleWarning(call, name string, rows, cols, mt, nt int) string {
	idle := b.idleRanks(mt, nt)
	if len(idle) == 0 {
		return ""
	}
	size := b.p * b.q
	what := fmt.Sprintf("%d x %d tiles", mt, nt)
	if name != "" {
		what = fmt.Sprintf("%q (%s of a %d x %d matrix)", name, what, rows, cols)
	} else {
		what = fmt.Sprintf("%s of a %d x %d matrix", what, rows, cols)
	}
	var ranks []string
	for _, r := range idle {
		ranks = append(ranks, fmt.Sprint(r))
	}
	fix := "smaller tiles, so that the matrix has at least P tile rows and Q tile columns"
	if p, q, ok := fittingGrid(size, mt, nt); ok {
		fix = fmt.Sprintf("BlockCyclic2D(%d, %d), which gives every rank tiles of this matrix, or %s", p, q, fix)
	}
	own := "ranks " + strings.Join(ranks, ", ") + " own"
	if len(idle) == 1 {
		own = "rank " + ranks[0] + " owns"
	}
	return fmt.Sprintf("dist: %s: the %d x %d process grid (BlockCyclic2D(%d, %d)) leaves %s of %d without a tile of %s: %s none, "+
		"so the tasks that write its tiles run on the other %s only; use %s",
		call, b.p, b.q, b.p, b.q, plural.Of(len(idle), "rank"), size, what, own, plural.Of(size-len(idle), "rank"), fix)
}

// fittingGrid returns the most square P x Q grid of size ranks with
// P <= mt and Q <= nt, if there is one.
func fittingGrid(size, mt, nt int) (p, q int, ok bool) {
	for d := 1; d <= size; d++ {
		if size%d != 0 || d > mt || size/d > nt {
			continue
		}
		if !ok || abs(d-size/d) < abs(p-q) {
			p, q, ok = d, size/d, true
		}
	}
	return p, q, ok
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
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
