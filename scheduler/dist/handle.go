package dist

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler"
)

// A Handle is distributed data: a contiguous vector or row-major matrix of
// numbers registered on every rank, with an owner rank whose memory holds
// it, and an identity (its registration index) that is the same on every
// rank. Other ranks keep cached copies of versions they read, allocated
// when first needed.
type Handle struct {
	d          *Scheduler
	id         int
	owner      int
	rows, cols int
	name       string
	dt         comm.Datatype
	alloc      func() any         // a zeroed buffer of the handle's shape
	raw        func(any) comm.Buf // the bytes of a buffer
	local      *scheduler.Handle  // this rank's copy; nil until needed
	data       any                // the memory of local
	opts       []scheduler.HandleOption

	// Coherence, the same on every rank (the submission walk computes it);
	// guarded by d.mu.
	writer  int     // the rank that wrote the latest version (at first the owner)
	holders rankSet // the ranks that hold the latest version

	// Reduction: the codelets, the ranks contributing to the reduction in
	// progress (nil if none), and each rank's partial result.
	rinit, rcombine *scheduler.Codelet
	phase           map[int]bool
	partials        map[int]*Handle
	isPartial       bool // h is a rank's partial result: it never goes back to an owner

	// gone is set by Unregister, at submission goneAt (the graph check's
	// numbering, the same on every rank); guarded by d.mu.
	gone   bool
	goneAt int
}

// ID is the handle's identity, the same on every rank.
func (h *Handle) ID() int { return h.id }

// Owner is the rank whose memory holds the handle.
func (h *Handle) Owner() int { return h.owner }

// Rows is the handle's number of rows (a vector's length), the same on
// every rank: the shape it was registered with, as an edge tile of
// RegisterMatrixTiles has its own.
func (h *Handle) Rows() int { return h.rows }

// Cols is the handle's number of columns (1 for a vector), the same on
// every rank.
func (h *Handle) Cols() int { return h.cols }

// Data returns this rank's memory of the handle: on the owner the slice it
// registered, elsewhere the cached copy (nil if never needed, or dropped
// by Scheduler.Flush; nil on every rank after Scheduler.Unregister). After
// WaitAll the owner's holds the latest version, also when a device of the
// owner's local scheduler computed it (its WaitAll brings it back).
//
// Data is this rank's host read-write access, as scheduler.Handle.Data:
// with devices in the local scheduler it also invalidates their copies,
// so that what the program writes into the memory - through what Data
// returns or the registered slice - before its next submission is what
// this rank's later tasks compute from. Use it between WaitAll and the
// next submission that uses h: tasks and transfers use the memory until
// then. To only read, use Fetch, which keeps the devices' copies.
//
// On a rank that does not hold the latest version (a non-owner that read
// an older one, the owner before WaitAll brings back a version another
// rank wrote) Data returns that older memory without saying so; Fetch
// fails there with ErrNotHeld.
//
// A write through Data changes this rank's memory only: the graph does
// not learn of it. The other ranks that hold the version (those that read
// it) keep their cached copies and compute from them, and a non-owner's
// write never leaves its rank. To change a handle's data between graphs,
// write it in a task (Submit: every rank sees the write in the submission
// walk, and the next readers elsewhere receive the new version), or with
// Update, which does that for a function of the data.
func (h *Handle) Data() any {
	lh, data := h.localData()
	if lh == nil {
		return data
	}
	return lh.Data()
}

// Fetch returns this rank's memory of the handle as Data does, for reading
// it: the newest version this rank holds is copied back from a device of
// the local scheduler if one computed it, and the devices' copies stay
// valid, so writes into the memory are not seen by this rank's tasks on
// devices (call Data to write). It returns ctx's error if ctx ends first
// (scheduler.Handle.Fetch).
//
// Fetch reads the latest version, as of the submissions so far, or fails:
// on a rank that does not hold it - a rank that never read the handle, a
// reader whose copy a later write made stale, the owner before WaitAll
// brings back a version another rank wrote - or while a reduction of it
// across ranks is in progress, it returns ErrNotHeld naming the ranks
// that hold it. On a rank that holds it (or will, once a transfer
// submitted already completes), it waits for this rank's tasks that
// write it, the receive included.
func (h *Handle) Fetch(ctx context.Context) (any, error) {
	h.d.mu.Lock()
	err := h.usableLocked()
	if err == nil {
		err = h.heldLocked()
	}
	h.d.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("dist: Fetch: %w", err)
	}
	lh, data := h.localData()
	if lh == nil {
		return data, nil
	}
	return lh.Fetch(ctx)
}

// heldLocked says why this rank cannot read h's latest version (as of
// the submissions so far) from its own memory: it does not hold it, or a
// reduction across ranks is in progress. d.mu is held.
func (h *Handle) heldLocked() error {
	d := h.d
	if h.phase != nil {
		ranks := make([]int, 0, len(h.phase))
		for r := range h.phase {
			ranks = append(ranks, r)
		}
		slices.Sort(ranks)
		return fmt.Errorf("%w: %v on rank %d: a reduction of it is in progress (Redux tasks on ranks %v); no rank holds the result until WaitAll, or the next task that reads or writes it, combines the partial results",
			ErrNotHeld, h, d.rank, ranks)
	}
	if h.holds(d.rank) {
		return nil
	}
	held := h.holders.members(d.size, 8)
	if d.rank == h.owner {
		return fmt.Errorf("%w: %v on rank %d, its owner: rank %d wrote the latest version (held by ranks %s) and WaitAll brings it back to the owner; Fetch after WaitAll",
			ErrNotHeld, h, d.rank, h.writer, held)
	}
	mine := "this rank has no copy"
	if h.data != nil {
		mine = "this rank's copy is of an older version"
	}
	return fmt.Errorf("%w: %v on rank %d: the latest version is held by ranks %s (rank %d wrote it), and %s; Fetch on the owner after WaitAll, Gather it to this rank, or read it in a task here",
		ErrNotHeld, h, d.rank, held, h.writer, mine)
}

// members lists the set's first max ranks of size, "[0 3 ...]".
func (s *rankSet) members(size, max int) string {
	var ranks []int
	more := false
	for r := range size {
		if s.has(r) {
			if len(ranks) == max {
				more = true
				break
			}
			ranks = append(ranks, r)
		}
	}
	out := fmt.Sprint(ranks)
	if more {
		out = out[:len(out)-1] + " ...]"
	}
	return out
}

// localData returns this rank's scheduler handle (nil if none yet) and
// memory of h.
func (h *Handle) localData() (*scheduler.Handle, any) {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	return h.local, h.data
}

// Update changes h's data between (or within) graphs: fn runs on h's
// owner with its latest version - a []T of rows x cols elements, row
// after row - as a task writing h submitted at this point would: after
// the tasks submitted before on h, before those submitted after. The
// other ranks then hold a stale version, and the next task that reads h
// on any of them receives the new one. Every rank calls Update at the
// same point of its submissions, like Submit (the graph check sees a task
// "dist.update" that reads and writes h, on its owner); fn is called on
// the owner only, on a worker of its local scheduler (a simulated
// device's, then on that device's copy), and other ranks may pass nil.
// Update does not wait for fn: WaitAll does, and returns fn's error as a
// task's. T must be the handle's element type (an error on every rank
// otherwise). It is how to apply a host write that would otherwise go
// through Data, which the other ranks cannot see.
func Update[T comm.Number](ctx context.Context, d *Scheduler, h *Handle, fn func(data []T) error) error {
	switch {
	case h == nil:
		return fmt.Errorf("dist: Update: %w: nil handle", comm.ErrInvalidArg)
	case h.d != d:
		return fmt.Errorf("dist: Update: %w: %v", ErrForeignHandle, h)
	}
	if dt := comm.DatatypeOf[T](); dt != h.dt {
		return fmt.Errorf("dist: Update of %v: %w: a function of []%v for a handle of %v", h, comm.ErrInvalidArg, dt, h.dt)
	}
	apply := func(data any) error {
		if fn == nil {
			return fmt.Errorf("dist: Update of %v: nil function on its owner, rank %d", h, h.owner)
		}
		x, ok := data.([]T)
		if !ok { // int and int64 have one Datatype
			return fmt.Errorf("dist: Update of %v: a function of %T for data of %T", h, x, data)
		}
		if err := fn(x); err != nil {
			return fmt.Errorf("dist: Update of %v: %w", h, err)
		}
		return nil
	}
	return d.Submit(ctx, updateCl, RW(h), OnRank(h.owner), With(scheduler.WithArg(apply)))
}

// updateCl runs an Update's function on the owner's data.
var updateCl = &scheduler.Codelet{Name: "dist.update", CPU: func(c *scheduler.Call) error {
	return c.Arg.(func(any) error)(c.Data(0))
}}

// String names the handle in errors.
func (h *Handle) String() string {
	if h.name != "" {
		return fmt.Sprintf("handle %q (#%d, owner %d)", h.name, h.id, h.owner)
	}
	return fmt.Sprintf("handle #%d (owner %d)", h.id, h.owner)
}

func (h *Handle) holds(r int) bool { return h.holders.has(r) }
func (h *Handle) hold(r int)       { h.holders.add(r, h.d.size) }
func (h *Handle) only(r int)       { h.holders.only(r) }

// A rankSet is a set of ranks: a short sorted list while it is small (a
// handle's latest version is usually held by its writer and a few
// readers), a bit set of every rank once the list would take more room.
// Every rank keeps one per handle: a bit set each was handles × n² / 8
// bytes between in-process ranks (1.5 GB for 256 tiles at 4,096 ranks).
type rankSet struct {
	list []int32  // sorted, when bits is nil
	bits []uint64 // one bit per rank, once the list outgrew size/32
}

func (s *rankSet) has(r int) bool {
	if s.bits != nil {
		return s.bits[r/64]&(1<<(r%64)) != 0
	}
	_, ok := slices.BinarySearch(s.list, int32(r))
	return ok
}

// add puts r in the set of ranks of a communicator of size ranks.
func (s *rankSet) add(r, size int) {
	if s.bits != nil {
		s.bits[r/64] |= 1 << (r % 64)
		return
	}
	i, ok := slices.BinarySearch(s.list, int32(r))
	if ok {
		return
	}
	if len(s.list) >= max(size/32, 4) {
		s.bits = make([]uint64, (size+63)/64)
		for _, x := range s.list {
			s.bits[x/64] |= 1 << (x % 64)
		}
		s.list = nil
		s.bits[r/64] |= 1 << (r % 64)
		return
	}
	s.list = slices.Insert(s.list, i, int32(r))
}

// only makes r the set's one member.
func (s *rankSet) only(r int) {
	if s.bits != nil {
		clear(s.bits)
		s.bits[r/64] |= 1 << (r % 64)
		return
	}
	s.list = append(s.list[:0], int32(r))
}

// localHandle returns this rank's scheduler handle, registering a cached
// copy on a non-owner the first time. d.mu is held.
func (h *Handle) localHandle() (*scheduler.Handle, error) {
	if h.local != nil {
		return h.local, nil
	}
	if h.data == nil {
		h.data = h.alloc()
	}
	lh, err := h.d.local.RegisterMatrix(h.data, h.rows, h.cols, h.opts...)
	if err != nil {
		return nil, fmt.Errorf("dist: registering the copy of %v on rank %d: %w", h, h.d.rank, err)
	}
	if h.rinit != nil {
		if err := lh.SetReduction(h.rinit, h.rcombine); err != nil {
			return nil, fmt.Errorf("dist: %v on rank %d: %w", h, h.d.rank, err)
		}
	}
	h.local = lh
	return lh, nil
}

// Register registers a rows x cols row-major matrix (a vector is n x 1)
// of T owned by rank owner. Every rank calls it, in the same order, with
// the same shape; data is the owner's memory (len rows*cols) and is ignored
// elsewhere (pass nil). The owner passes memory also for a handle that
// tasks use only as Scratch (make([]T, rows*cols)): nil data on the
// owner is refused, since it is far more often a forgotten slice;
// RegisterTiles allocates the owner's tiles itself. Options name the
// handle in errors and traces; a leading dimension (scheduler.LD) other
// than cols is refused on every rank (ErrInvalidArg): the data move
// between ranks as one contiguous block.
func Register[T comm.Number](d *Scheduler, owner int, data []T, rows, cols int, opts ...scheduler.HandleOption) (*Handle, error) {
	if owner < 0 || owner >= d.size {
		return nil, fmt.Errorf("dist: Register: %w: owner %d of %d ranks", ErrBadRank, owner, d.size)
	}
	if rows < 1 || cols < 1 {
		return nil, fmt.Errorf("dist: Register: %w: shape %d x %d", comm.ErrInvalidArg, rows, cols)
	}
	if err := checkContiguous(cols, opts); err != nil {
		return nil, fmt.Errorf("dist: Register: %w", err)
	}
	if d.rank == owner && len(data) != rows*cols {
		// Only the owner sees its data: the other ranks registered the
		// handle, so the graphs part here. The failure is the graph's, on
		// every rank, naming this registration (not a later mismatch).
		d.mu.Lock()
		id := d.nextID
		d.mu.Unlock()
		what := fmt.Sprintf("Register of handle #%d%s: %d elements for a %d x %d handle", id, nameSuffix(opts), len(data), rows, cols)
		err := fmt.Errorf("dist: rank %d: %w: %s", d.rank, comm.ErrInvalidArg, what)
		d.fail(err, what)
		return nil, err
	}
	h := &Handle{d: d, owner: owner, rows: rows, cols: cols, dt: comm.DatatypeOf[T](), opts: opts, writer: owner,
		name:  scheduler.NameOf(opts...),
		alloc: func() any { return make([]T, rows*cols) },
		raw:   func(v any) comm.Buf { return comm.BufOf(v.([]T)) },
	}
	h.hold(owner)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.closing.Load() {
		return nil, fmt.Errorf("dist: Register: %w", ErrClosed)
	}
	h.id = d.nextID
	if h.id+1 > d.tagLimit {
		return nil, fmt.Errorf("dist: Register: %w: more than %d handles registered, reductions' partial results counted (numbers are never reused, also after Unregister)", comm.ErrInvalidArg, d.tagLimit)
	}
	if d.rank == owner {
		h.data = data
		if _, err := h.localHandle(); err != nil {
			return nil, err
		}
	}
	d.handles = append(d.handles, h)
	d.nextID++
	d.registered++
	return h, nil
}

// checkContiguous refuses a leading dimension (scheduler.LD) other than
// the column count cols: a distributed handle's elements move between
// ranks as one block of rows x cols, and every rank refuses the same
// arguments alike, the owner and the others.
func checkContiguous(cols int, opts []scheduler.HandleOption) error {
	if ld := scheduler.LDOf(opts...); ld != 0 && ld != cols {
		return fmt.Errorf("%w: scheduler.LD(%d) for %d columns: a distributed handle is contiguous (its data move between ranks as one block); copy the submatrix into a slice of its own", comm.ErrInvalidArg, ld, cols)
	}
	return nil
}

// nameSuffix is ` "name"` for a handle named by opts, else "".
func nameSuffix(opts []scheduler.HandleOption) string {
	if n := scheduler.NameOf(opts...); n != "" {
		return fmt.Sprintf(" %q", n)
	}
	return ""
}

// maxTag bounds the tags of transfers (a handle's id + 1): MPI promises
// only 32767, but Open MPI accepts 2^31-1 and MPICH 4 2^28-1
// (MPI_TAG_UB, mpi.Comm.TagUB), whose last, clockTag, the merged
// trace's clock rounds take.
const maxTag = 1<<28 - 2

// clockTag carries the clock rounds of WriteTraceFiles (clockOffsets).
const clockTag = maxTag + 1

// RegisterTiles registers an mt x nt grid of mb x nb tiles of T, tile
// (i, j) owned by dist.Owner(i, j). On its owner a tile is allocated and
// filled by init (if not nil) with its elements in row-major order; other
// ranks allocate nothing until they need a copy. Options apply to every
// tile; scheduler.Named("A") names tile (i, j) "A(i,j)" in errors, stall
// reports and traces (without it, "(i,j)": name each grid of a program
// that registers several). A distribution that does not fit the ranks, a
// Cyclic1D made for another number of tile columns than nt, or one that
// gives a tile to a rank outside [0, Size()) is refused (ErrDistribution,
// ErrBadRank), before any registration. For a matrix whose sides are not
// multiples of the tile's, RegisterMatrixTiles makes the smaller edge
// tiles.
func RegisterTiles[T comm.Number](d *Scheduler, mt, nt, mb, nb int, dist Distribution, init func(i, j int, tile []T), opts ...scheduler.HandleOption) ([][]*Handle, error) {
	const call = "RegisterTiles"
	if dist == nil {
		return nil, fmt.Errorf("dist: %s: %w: no distribution (nil); use BlockCyclic2D, Cyclic1D or Func", call, ErrDistribution)
	}
	if mt < 1 || nt < 1 || mb < 1 || nb < 1 {
		return nil, fmt.Errorf("dist: %s: %w: a %d x %d grid of %d x %d tiles", call, comm.ErrInvalidArg, mt, nt, mb, nb)
	}
	if err := checkContiguous(nb, opts); err != nil {
		return nil, fmt.Errorf("dist: %s: %w", call, err)
	}
	var fill func(i, j, _, _ int, tile []T)
	if init != nil {
		fill = func(i, j, _, _ int, tile []T) { init(i, j, tile) }
	}
	return registerGrid(d, call, mt*mb, nt*nb, mt, nt, mb, nb, dist, fill, opts)
}

// RegisterMatrixTiles registers the tiles of a rows x cols row-major
// matrix of T cut as ScaLAPACK cuts an M x N matrix in MB x NB blocks:
// ceil(rows/mb) rows of tiles by ceil(cols/nb) columns, tile (i, j)
// holding rows i*mb.. and columns j*nb.. of the matrix. Every tile is
// mb x nb except those of the last row of tiles, which hold the rows
// left (rows mod mb, when mb does not divide rows), and those of the last
// column, which hold the columns left; when mb and nb divide the matrix
// it is the grid RegisterTiles makes. The grid is the layout that
// ScatterMatrix and GatherMatrix expect for a rows x cols matrix, and
// its tiles are handles as any others for Submit (a task learns a tile's
// shape from scheduler.Call.Dims).
//
// Tile (i, j) is owned by dist.Owner(i, j). On its owner it is allocated
// and, if init is not nil, filled by init(i, j, tileRows, tileCols, tile):
// tile is tileRows x tileCols, row-major (len(tile) ==
// tileRows*tileCols), and its element (r, c) is element (i*mb + r,
// j*nb + c) of the matrix. init runs on the calling goroutine, on the
// owner only, tile after tile in row-major order of the grid; the other
// ranks allocate nothing until they need a copy.
//
// Options apply to every tile, as with RegisterTiles:
// scheduler.Named("A") names tile (i, j) "A(i,j)". A leading dimension
// (scheduler.LD) is refused unless it is the width of every tile (nb,
// and the last column's); non-positive sizes are refused
// (comm.ErrInvalidArg), and so are a distribution that does not fit the
// ranks, a Cyclic1D made for another number of tile columns than
// ceil(cols/nb), and one that gives a tile to a rank outside [0, Size())
// (ErrDistribution, ErrBadRank), all before any registration. Every rank
// calls it, in the same order with the same arguments, as Register.
func RegisterMatrixTiles[T comm.Number](d *Scheduler, rows, cols, mb, nb int, dist Distribution, init func(i, j, tileRows, tileCols int, tile []T), opts ...scheduler.HandleOption) ([][]*Handle, error) {
	const call = "RegisterMatrixTiles"
	if dist == nil {
		return nil, fmt.Errorf("dist: %s: %w: no distribution (nil); use BlockCyclic2D, Cyclic1D or Func", call, ErrDistribution)
	}
	if rows < 1 || cols < 1 || mb < 1 || nb < 1 {
		return nil, fmt.Errorf("dist: %s: %w: a %d x %d matrix in tiles of %d x %d (every size at least 1)", call, comm.ErrInvalidArg, rows, cols, mb, nb)
	}
	mt, nt := (rows+mb-1)/mb, (cols+nb-1)/nb
	// The tiles of the last column are lastCols wide: a leading
	// dimension must fit them too.
	if err := checkContiguous(nb, opts); err != nil {
		return nil, fmt.Errorf("dist: %s: %w", call, err)
	}
	if lastCols := cols - (nt-1)*nb; lastCols != nb {
		if err := checkContiguous(lastCols, opts); err != nil {
			return nil, fmt.Errorf("dist: %s: %w (the last column of tiles of a %d x %d matrix in tiles of %d x %d)", call, err, rows, cols, mb, nb)
		}
	}
	return registerGrid(d, call, rows, cols, mt, nt, mb, nb, dist, init, opts)
}

// registerGrid registers the mt x nt grid of tiles of a rows x cols
// matrix (RegisterTiles, RegisterMatrixTiles), each mb x nb but those of
// the last row and column, which hold the rest; the caller checked the
// sizes and the options.
func registerGrid[T comm.Number](d *Scheduler, call string, rows, cols, mt, nt, mb, nb int, dist Distribution, init func(i, j, tileRows, tileCols int, tile []T), opts []scheduler.HandleOption) ([][]*Handle, error) {
	if err := dist.Check(d.size); err != nil {
		return nil, fmt.Errorf("dist: %s: %w", call, err)
	}
	if g, ok := dist.(gridChecker); ok {
		if err := g.checkGrid(mt, nt); err != nil {
			return nil, fmt.Errorf("dist: %s: %w", call, err)
		}
	}
	// Every owner first: a bad one leaves nothing registered, so that the
	// handles registered later keep their numbers.
	owners := make([][]int, mt)
	for i := range mt {
		owners[i] = make([]int, nt)
		for j := range nt {
			owner := dist.Owner(i, j)
			if owner < 0 || owner >= d.size {
				return nil, fmt.Errorf("dist: %s: %w: the distribution gives tile (%d, %d) to rank %d of %d", call, ErrBadRank, i, j, owner, d.size)
			}
			owners[i][j] = owner
		}
	}
	prefix := scheduler.NameOf(opts...)
	out := make([][]*Handle, mt)
	for i := range mt {
		out[i] = make([]*Handle, nt)
		h := min(mb, rows-i*mb)
		for j := range nt {
			w := min(nb, cols-j*nb)
			owner := owners[i][j]
			var tile []T
			if owner == d.rank {
				tile = make([]T, h*w)
				if init != nil {
					init(i, j, h, w, tile)
				}
			}
			name := fmt.Sprintf("%s(%d,%d)", prefix, i, j)
			t, err := Register(d, owner, tile, h, w, append(slices.Clip(opts), scheduler.Named(name))...)
			if err != nil {
				return nil, err
			}
			out[i][j] = t
		}
	}
	if b, ok := dist.(blockCyclic); ok && d.rank == 0 && d.report != nil {
		// Every rank registers the same grid: rank 0 alone says it, once
		// for grids of the same tiles on the same process grid.
		if w := b.idleWarning(call, prefix, rows, cols, mt, nt); w != "" && d.firstIdleWarning(b, mt, nt) {
			d.report(w + fmt.Sprintf(" (said once: later grids of %d x %d tiles on this process grid leave the same ranks idle)", mt, nt))
		}
	}
	return out, nil
}

// firstIdleWarning reports whether rank 0 has not yet warned of the idle
// ranks of an mt x nt grid of tiles on b, and records that it now has.
func (d *Scheduler) firstIdleWarning(b blockCyclic, mt, nt int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := [4]int{b.p, b.q, mt, nt}
	if d.idleWarned[key] {
		return false
	}
	if d.idleWarned == nil {
		d.idleWarned = map[[4]int]bool{}
	}
	d.idleWarned[key] = true
	return true
}

// An Arg is an argument of Submit: a data access (R, W, RW, Commute,
// Scratch), a placement (OnRank) or an option of the local task (With).
type Arg struct {
	h      *Handle
	mode   scheduler.Mode
	rank   int  // OnRank's rank, when placed
	placed bool // an OnRank
	opt    *scheduler.Arg
}

// R reads h.
func R(h *Handle) Arg { return Arg{h: h, mode: scheduler.ModeR} }

// W writes h without reading it.
func W(h *Handle) Arg { return Arg{h: h, mode: scheduler.ModeW} }

// RW reads and writes h.
func RW(h *Handle) Arg { return Arg{h: h, mode: scheduler.ModeRW} }

// Commute reads and writes h; consecutive commuting tasks on one rank may
// run in any order (scheduler.Commute). Across ranks they run in
// submission order.
func Commute(h *Handle) Arg { return Arg{h: h, mode: scheduler.ModeRW | scheduler.ModeCommute} }

// Scratch gives the task a private buffer of h's shape on the rank that
// runs it; no data moves.
func Scratch(h *Handle) Arg { return Arg{h: h, mode: scheduler.ModeScratch} }

// OnRank runs the task on rank r instead of the owner of what it writes.
// Submit refuses a rank outside the communicator (ErrBadRank).
func OnRank(r int) Arg { return Arg{rank: r, placed: true} }

// With passes a task option (scheduler.WithPriority, WithArg, WithTag,
// ...) to the local task on the rank that runs it. The local task is
// always canceled by the graph's failure if it has not started (see
// Scheduler.WaitAll): a scheduler.CancelOn given here is ignored.
func With(a scheduler.Arg) Arg { return Arg{opt: &a} }

// Submit submits a task of cl with the given accesses on every rank: each
// rank calls it with the same codelet, handles and modes, in the same
// order. The task runs on OnRank's rank if given, else on the owner of the
// first handle it writes, else on the owner of its first handle, else on
// rank 0. Every access that reads data the running rank does not hold in
// its latest version makes the rank that wrote that version send it, once
// it is produced; the other ranks only record where the data now lives.
func (d *Scheduler) Submit(ctx context.Context, cl *scheduler.Codelet, args ...Arg) (err error) {
	// After d.mu is released (brokenAnswer waits for the progress loop).
	before := d.failure()
	defer func() { err = d.reply(before, d.brokenAnswer(ctx, "Submit", err)) }()
	if cl == nil {
		// Refused before the graph check, as a nil handle is: ranks that
		// all pass nil here still submit the same graph.
		return fmt.Errorf("dist: Submit: %w: nil codelet (argument cl); pass a *scheduler.Codelet with a Name and an implementation", comm.ErrInvalidArg)
	}
	if d.closing.Load() {
		// Before d.mu, which Close's comparison of the graphs holds.
		return fmt.Errorf("dist: submitting %q on rank %d: %w: Close was called on this rank (from another goroutine?) while its program was still submitting", cl.Name, d.rank, ErrClosed)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing.Load() && !d.closed {
		// Close began while this Submit waited for d.mu: its wait may
		// have compared the graphs already, without this submission.
		return fmt.Errorf("dist: submitting %q on rank %d: %w: Close was called on this rank (from another goroutine?) while its program was still submitting", cl.Name, d.rank, ErrClosed)
	}
	if d.closed {
		return fmt.Errorf("dist: submitting %q: %w", cl.Name, ErrClosed)
	}
	if err := d.failure(); err != nil {
		return fmt.Errorf("dist: submitting %q: %w", cl.Name, err)
	}
	onRank := -1
	sub := submission{codelet: cl.Name}
	// The accesses go into the graph check's array of the window's
	// accesses: no allocation per submission.
	mark := len(d.check.acc)
	for i, a := range args {
		switch {
		case a.placed:
			onRank = a.rank
			if onRank < 0 || onRank >= d.size {
				return fmt.Errorf("dist: submitting %q: %w: OnRank(%d) with %d ranks", cl.Name, ErrBadRank, onRank, d.size)
			}
		case a.opt != nil:
		case a.h == nil:
			return fmt.Errorf("dist: submitting %q: %w: argument %d has a nil handle", cl.Name, comm.ErrInvalidArg, i)
		case a.h.d != d:
			return fmt.Errorf("dist: submitting %q: %w: argument %d is %v", cl.Name, ErrForeignHandle, i, a.h)
		case a.h.gone:
			return fmt.Errorf("dist: submitting %q: argument %d: %w", cl.Name, i, a.h.usableLocked())
		case a.mode == scheduler.ModeRedux && a.h.rinit == nil:
			return fmt.Errorf("dist: submitting %q: %w: Redux on %v, which has no reduction; call SetReduction first", cl.Name, comm.ErrInvalidArg, a.h)
		default:
			d.check.acc = append(d.check.acc, describeAccess(a.h, a.mode))
		}
	}
	if n := len(d.check.acc); n > mark {
		sub.access = d.check.acc[mark:n:n]
	}
	if err := mixedModes(args); err != nil {
		return fmt.Errorf("dist: submitting %q: %w", cl.Name, err)
	}
	if err := d.partialsFitLocked(args); err != nil {
		return fmt.Errorf("dist: submitting %q: %w", cl.Name, err)
	}
	sub.onRank = onRank
	if err := ctx.Err(); err != nil {
		// A rank whose context has ended stops here, also where this
		// task neither runs on it nor needs a transfer of its own (which
		// alone would see the context): its Submit does not succeed on
		// an ended context, and the other ranks hear at once where it
		// stopped.
		if cause := context.Cause(ctx); cause != err {
			err = fmt.Errorf("%w: %w", err, cause)
		}
		return d.interrupted(ctx, cl.Name, err)
	}
	if err := d.recordLocked(ctx, "Submit", sub); err != nil {
		return err
	}
	if d.local.Recording() {
		// The merged Gantt chart's colours follow this order.
		d.trace.submitted(cl.Name)
	}
	d.walking = cl
	err = d.submitLocked(ctx, cl, args...)
	d.walking = nil
	if err != nil {
		ierr := d.interrupted(ctx, cl.Name, err)
		if ierr != nil && errors.Is(err, ctx.Err()) {
			// The context ended while this rank made a transfer or its
			// local task: name the program's submission, not those.
			return ierr
		}
		if ierr == nil {
			// This rank's local scheduler refused the task or a transfer
			// (a codelet with no implementation for its workers, ...),
			// which only this rank sees: its walk stopped half way, and
			// the other ranks, which recorded the task's writes, would
			// wait for data this rank never sends. The graph fails on
			// every rank, naming the submission, as a failed task does.
			task := describeTask(cl, d.check.n-1, true, false, args)
			cause := &reworded{strings.TrimPrefix(err.Error(), fmt.Sprintf("dist: rank %d: ", d.rank)), err}
			d.fail(fmt.Errorf("%w: rank %d: %s: %w", ErrRankFailed, d.rank, task, cause), task+": "+cause.msg)
			return fmt.Errorf("dist: rank %d: %s: %w", d.rank, task, cause)
		}
		return err
	}
	return nil
}

// mixedModes refuses a task that names one handle twice in different
// modes, one of them Redux, Scratch or Commute, as the local scheduler
// does: on every rank, before the graph check. The running rank's local
// scheduler alone would see it, and only where both accesses are to the
// same local handle: on a rank other than the writer a Redux access goes
// into the rank's partial result, and the task would run there.
func mixedModes(args []Arg) error {
	const exclusive = scheduler.ModeScratch | scheduler.ModeRedux | scheduler.ModeCommute
	for i, a := range args {
		if a.h == nil {
			continue
		}
		for j, b := range args[:i] {
			if b.h == a.h && b.mode != a.mode && (a.mode|b.mode)&exclusive != 0 {
				return fmt.Errorf("%w: %w: %v is accessed as both %v (argument %d) and %v (argument %d); a handle in Redux, Scratch or Commute mode must be the task's only access to it",
					comm.ErrInvalidArg, scheduler.ErrInvalidMode, a.h, b.mode, j, a.mode, i)
			}
		}
	}
	return nil
}

// reworded is err read as msg: err's chain under a message that does not
// repeat what the caller's wrapping says already.
type reworded struct {
	msg string
	err error
}

func (e *reworded) Error() string { return e.msg }
func (e *reworded) Unwrap() error { return e.err }

// recordLocked adds sub, a submission of the program's made by call
// (Submit, Unregister, Flush, or Scatter, Gather, ScatterMatrix and
// GatherMatrix through compareFirst), to the graph check, which compares
// the ranks' submissions. d.mu is held.
func (d *Scheduler) recordLocked(ctx context.Context, call string, sub submission) error {
	if err := d.check.add(ctx, d.c, sub); err != nil {
		stalled := errors.Is(err, ErrStalled)
		if stalled {
			err = fmt.Errorf("%w; %s", err, d.explain())
		}
		switch stopped := d.interrupted(ctx, sub.codelet, err); {
		case stopped != nil:
			// This rank's context ended in the comparison at the
			// window's end: it leaves the graph here, as compareFirst
			// does when its context ends, rather than start another
			// comparison in a later WaitAll with a fresh context.
			d.quitLocked(call, stopped, "")
		case stalled && d.check.diverged == nil:
			// A rank never came to the comparison at the window's
			// end: this rank leaves the graph here, as compareFirst's
			// stall does, rather than start another comparison in a
			// later WaitAll that waited a second stall timeout.
			d.quitLocked(call, err, "")
		default:
			d.fail(err, "")
		}
		return fmt.Errorf("dist: rank %d: submitting %q: %w", d.rank, sub.codelet, err)
	}
	d.unwaited++
	return nil
}

// describeAccess is how the graph check sees an access of mode to h.
func describeAccess(h *Handle, mode scheduler.Mode) accessDesc {
	a := accessDesc{id: h.id, mode: mode, owner: h.owner, rows: h.rows, cols: h.cols, dt: h.dt, name: h.name}
	if mode == scheduler.ModeRedux && h.rinit != nil {
		// Each rank starts its partial result with its own init and the
		// writer folds them in with its combine: ranks that set
		// different reductions would compute a mix of them.
		a.reduction = h.rinit.Name + "/" + h.rcombine.Name
	}
	return a
}

// interrupted records, when ctx has ended, that this rank stopped
// submitting the graph: a failure of this rank, told to the others so
// that they stop too, and named by the graph check and WaitAll rather
// than a difference of the graphs. It returns the failure it recorded
// (naming the codelet and wrapping err), or nil when ctx has not ended.
func (d *Scheduler) interrupted(ctx context.Context, codelet string, err error) error {
	if ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(ctx)
	stopped := fmt.Errorf("dist: rank %d stopped submitting at %q: %w", d.rank, codelet, err)
	d.fail(stopped, fmt.Sprintf("stopped submitting at %q: %v", codelet, cause))
	return stopped
}

// runRank is the rank a task of args runs on: OnRank's, else the owner
// of the first handle it writes, else of its first handle, else rank 0.
func runRank(args []Arg) int {
	run := -1
	var firstW, first *Handle
	for _, a := range args {
		switch {
		case a.placed:
			run = a.rank
		case a.opt != nil:
		default:
			if first == nil {
				first = a.h
			}
			if firstW == nil && a.mode&scheduler.ModeW != 0 {
				firstW = a.h
			}
		}
	}
	switch {
	case run >= 0:
		return run
	case firstW != nil:
		return firstW.owner
	case first != nil:
		return first.owner
	}
	return 0
}

// partialsFitLocked refuses a submission whose Redux accesses would
// make more partial results (contributeLocked) than the handle numbers
// left: a partial's transfers take its number + 1 as their tag, as a
// handle's do, and every tag must stay below the reserved clockTag
// (d.tagLimit). Every rank refuses alike: the handles, their writers and
// partial results are the same on every rank. d.mu is held.
func (d *Scheduler) partialsFitLocked(args []Arg) error {
	run := runRank(args)
	need := 0
	for i, a := range args {
		if a.h == nil || a.mode != scheduler.ModeRedux || run == a.h.writer || a.h.partials[run] != nil {
			continue
		}
		if slices.ContainsFunc(args[:i], func(b Arg) bool { return b.h == a.h && b.mode == scheduler.ModeRedux }) {
			continue // one partial per handle and rank
		}
		need++
	}
	if need > 0 && d.nextID+need > d.tagLimit {
		return fmt.Errorf("%w: this task's Redux needs %d partial result(s) on rank %d, which take handle numbers as handles do, and %d of the %d handle numbers are taken (numbers are never reused, also after Unregister)", comm.ErrInvalidArg, need, run, d.nextID, d.tagLimit)
	}
	return nil
}

// submitLocked walks one submission (checked by Submit, or made by the
// layer itself identically on every rank). d.mu is held.
func (d *Scheduler) submitLocked(ctx context.Context, cl *scheduler.Codelet, args ...Arg) error {
	run := runRank(args)
	// A reduction ends at the next other access: combine it first.
	for _, a := range args {
		if a.h != nil && a.mode != scheduler.ModeRedux && a.h.phase != nil {
			if err := d.endReduxLocked(ctx, a.h); err != nil {
				return err
			}
		}
	}
	// Bring what the task reads to run, then record what it writes.
	for _, a := range args {
		if a.h == nil {
			continue
		}
		if a.mode&scheduler.ModeR != 0 && !a.h.holds(run) {
			if err := d.transferLocked(ctx, a.h, a.h.writer, run); err != nil {
				return err
			}
		}
	}
	// A contribution to a reduction goes into the latest version on its
	// writer, elsewhere into the rank's partial result (target).
	for _, a := range args {
		if a.h != nil && a.mode == scheduler.ModeRedux {
			if _, err := d.contributeLocked(ctx, a.h, run); err != nil {
				return err
			}
		}
	}
	if d.rank == run {
		if err := d.submitLocal(ctx, cl, run, args); err != nil {
			return err
		}
	}
	for _, a := range args {
		if a.h != nil && a.mode&scheduler.ModeW != 0 {
			a.h.writer = run
			a.h.only(run)
		}
	}
	return nil
}

// target is the handle that an access a of a task on rank run uses: a
// contribution to a reduction goes into the latest version on its
// writer, elsewhere into the rank's partial result (contributeLocked
// made it); any other access uses a's handle. d.mu is held.
func target(a Arg, run int) *Handle {
	if a.mode == scheduler.ModeRedux && run != a.h.writer {
		return a.h.partials[run]
	}
	return a.h
}

// submitLocal submits the local task of a submission walked on the
// rank that runs it (run, this rank). Its arguments are built in
// d.localArgs, which the local scheduler does not keep, and its
// callback is a pooled taskDone: no allocation of this layer's per task.
// d.mu is held.
func (d *Scheduler) submitLocal(ctx context.Context, cl *scheduler.Codelet, run int, args []Arg) error {
	// Before the caller's callbacks: a failure is recorded by the time
	// they see the task done. A failure names the task as the graph
	// check names a submission (its number and data), as a tiled
	// program submits many tasks of one codelet.
	td := d.newTaskDone(cl, d.check.n-1, cl == d.walking, d.walkingWaitAll, args)
	local := append(d.localArgs[:0], scheduler.OnDone(td.fn))
	for _, a := range args {
		if a.opt != nil {
			local = append(local, *a.opt)
		}
	}
	for _, a := range args {
		if a.h == nil {
			continue
		}
		lh, err := target(a, run).localHandle()
		if err != nil {
			d.localArgs = clearArgs(local)
			d.putTaskDone(td)
			return err
		}
		local = append(local, scheduler.Data(lh, a.mode))
	}
	// Last: the graph's failure cancels the task (With's CancelOn
	// does not replace it).
	local = append(local, scheduler.CancelOn(d.graph))
	d.pos.open.Add(1)
	td.counted.Store(true)
	td.refs.Store(2) // this call's and the callback's
	err := d.local.Submit(ctx, cl, local...)
	d.localArgs = clearArgs(local)
	if err != nil {
		// A task that Submit refused never runs its callback: counted
		// done here. One that it accepted and waited for
		// (scheduler.Synchronous, passed with With) ran it already (the
		// task failed: uncount does nothing, the task is not counted
		// done twice), or runs it once the task ends, when Submit's
		// context ended first (ErrTaskPending): the task still runs,
		// and only its callback counts it done.
		if !errors.Is(err, scheduler.ErrTaskPending) {
			td.uncount()
		}
		// Released as well: a refused task's callback never drops its
		// reference, so td is the garbage collector's then.
		td.release()
		return fmt.Errorf("dist: rank %d: %w", d.rank, err)
	}
	td.release()
	return nil
}

// clearArgs returns args emptied, without the references it held.
func clearArgs(args []scheduler.Arg) []scheduler.Arg {
	clear(args)
	return args[:0]
}

// taskDone is the callback of a local task of the graph: it counts the
// task done and, if it failed, names it as describeTask does, from the
// submission's accesses (a copy: the program may reuse its slice of
// arguments). It goes back to d's pool once it has run; fn, made once
// per taskDone, calls it.
type taskDone struct {
	d         *Scheduler
	cl        *scheduler.Codelet
	seq       int
	own, wait bool
	args      []Arg
	fn        func(error)
	// counted is set while the task counts as not done (pos.open):
	// the first of its callback and a failed Submit (uncount) clears
	// it and counts the task done.
	counted atomic.Bool
	// refs are the holders of the taskDone, submitLocal and the
	// callback: the last to release it puts it back in the pool.
	refs atomic.Int32
}

// newTaskDone returns a taskDone from d's pool, set for the task.
func (d *Scheduler) newTaskDone(cl *scheduler.Codelet, seq int, own, wait bool, args []Arg) *taskDone {
	td, _ := d.taskDones.Get().(*taskDone)
	if td == nil {
		td = &taskDone{d: d}
		td.fn = td.done
	}
	td.cl, td.seq, td.own, td.wait = cl, seq, own, wait
	td.args = append(td.args[:0], args...)
	return td
}

// putTaskDone puts td back in d's pool, without its references.
func (d *Scheduler) putTaskDone(td *taskDone) {
	td.cl = nil
	clear(td.args)
	td.args = td.args[:0]
	d.taskDones.Put(td)
}

// uncount counts the task done (pos.open) unless it was already.
func (td *taskDone) uncount() {
	if td.counted.CompareAndSwap(true, false) {
		td.d.pos.open.Add(-1)
	}
}

// release drops one holder's reference (refs); the last one puts td
// back in d's pool.
func (td *taskDone) release() {
	if td.refs.Add(-1) == 0 {
		td.d.putTaskDone(td)
	}
}

// done is the task's callback.
func (td *taskDone) done(err error) {
	td.uncount()
	td.d.onTaskDone(err, td.describe)
	td.release()
}

// describe names the task for a failure (describeTask).
func (td *taskDone) describe() string {
	return describeTask(td.cl, td.seq, td.own, td.wait, td.args)
}

// SetReduction gives h the codelets of Redux accesses, as
// scheduler.Handle.SetReduction: init sets its one buffer to the identity,
// combine folds its second buffer into its first. Every rank calls it,
// with codelets of the same names: the graph check compares the names
// with each Redux access (ErrGraphMismatch).
func (h *Handle) SetReduction(init, combine *scheduler.Codelet) error {
	if init == nil || combine == nil || init.CPU == nil || combine.CPU == nil {
		return fmt.Errorf("dist: SetReduction on %v: %w: init and combine need CPU implementations", h, comm.ErrInvalidArg)
	}
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if err := h.usableLocked(); err != nil {
		return fmt.Errorf("dist: SetReduction: %w", err)
	}
	h.rinit, h.rcombine = init, combine
	if h.local != nil {
		return h.local.SetReduction(init, combine)
	}
	return nil
}

// contributeLocked returns the handle a Redux access to h by a task on rank
// run accumulates into: h itself on h's writer, else run's partial result
// of h, which joins the reduction (initialized to the identity) the first
// time. d.mu is held.
func (d *Scheduler) contributeLocked(ctx context.Context, h *Handle, run int) (*Handle, error) {
	if h.phase == nil {
		h.phase = map[int]bool{}
	}
	if run == h.writer {
		h.phase[run] = true
		return h, nil
	}
	p := h.partials[run]
	if p == nil {
		p = &Handle{d: d, owner: run, rows: h.rows, cols: h.cols, dt: h.dt, alloc: h.alloc, raw: h.raw,
			writer: run, name: fmt.Sprintf("partial of %v on rank %d", h, run),
			rinit: h.rinit, rcombine: h.rcombine, isPartial: true}
		// Named on the local scheduler too: its reduction's combine of
		// the workers' copies names the handle if it fails.
		p.opts = []scheduler.HandleOption{scheduler.Named(p.name)}
		p.hold(run)
		if d.nextID+1 > d.tagLimit {
			// Submit refused the task before (partialsFitLocked).
			return nil, fmt.Errorf("dist: %w: no handle number left for the partial result of %v on rank %d (%d taken)", comm.ErrInvalidArg, h, run, d.tagLimit)
		}
		p.id = d.nextID
		d.nextID++
		d.handles = append(d.handles, p)
		if h.partials == nil {
			h.partials = map[int]*Handle{}
		}
		h.partials[run] = p
	}
	if !h.phase[run] {
		h.phase[run] = true
		if err := d.submitLocked(ctx, h.rinit, W(p), OnRank(run)); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// endReduxLocked combines the partial results of h's reduction into the
// latest version, on its writer. d.mu is held.
func (d *Scheduler) endReduxLocked(ctx context.Context, h *Handle) error {
	ranks := make([]int, 0, len(h.phase))
	for r := range h.phase {
		ranks = append(ranks, r)
	}
	slices.Sort(ranks) // the same order on every rank
	h.phase = nil
	combined := false
	for _, r := range ranks {
		if r == h.writer {
			continue // its contributions went into h
		}
		if err := d.submitLocked(ctx, h.rcombine, RW(h), R(h.partials[r]), OnRank(h.writer)); err != nil {
			return err
		}
		combined = true
	}
	if !combined {
		// Only the writer contributed: an access that folds its local
		// scheduler's per-worker copies into h.
		return d.submitLocked(ctx, flush, RW(h), OnRank(h.writer))
	}
	return nil
}

// flush is an access that does nothing but end a local reduction.
var flush = &scheduler.Codelet{Name: "dist.flush", CPU: func(*scheduler.Call) error { return nil }}

// Redux accumulates into h with its reduction (see SetReduction): tasks on
// any ranks contribute, each rank into a partial result started from the
// identity, and the partial results are combined into h on the rank that
// holds its latest version before h is next read or written, or at
// WaitAll.
func Redux(h *Handle) Arg { return Arg{h: h, mode: scheduler.ModeRedux} }

// onTaskDone counts a completed task or transfer as progress and
// announces a failed one to the other ranks. what, if not nil, names the
// task for the failure.
func (d *Scheduler) onTaskDone(err error, what func() string) {
	d.progressed.Add(1)
	if err != nil {
		if what == nil {
			d.fail(fmt.Errorf("%w: rank %d: %w", ErrRankFailed, d.rank, err), err.Error())
			return
		}
		task := what()
		d.fail(fmt.Errorf("%w: rank %d: %s: %w", ErrRankFailed, d.rank, task, err), task+": "+err.Error())
		if !errors.Is(err, scheduler.ErrCanceled) {
			// A task that failed by itself (not canceled by the graph's
			// failure, nor for a task it depends on) after the graph
			// had failed elsewhere: WaitAll names it too.
			d.failMu.Lock()
			if d.origin == "" && d.later == "" {
				d.later = task + ": " + err.Error()
			}
			d.failMu.Unlock()
		}
	}
}

// describeTask names a task of codelet cl walked in submission seq (the
// program's own task if own, else one the layer submitted for it: a
// reduction's init or combine) by its data: 'task "gemm" of submission
// #21: R("A(2,0)") R("A(0,1)") RW("A(2,1)")', a handle without a name by
// its number (R(#7)). One the layer submitted in WaitAll (wait: a
// reduction's combine) is 'task "add" at WaitAll after submission #21'.
func describeTask(cl *scheduler.Codelet, seq int, own, wait bool, args []Arg) string {
	var b strings.Builder
	fmt.Fprintf(&b, "task %q %s:", cl.Name, walkPoint(seq, own, wait))
	for _, a := range args {
		if a.h == nil {
			continue
		}
		if a.h.name != "" {
			fmt.Fprintf(&b, " %v(%q)", a.mode, a.h.name)
		} else {
			fmt.Fprintf(&b, " %v(#%d)", a.mode, a.h.id)
		}
	}
	return b.String()
}

// walkPoint says where the walk was when the layer made a task: "of
// submission #21" for the program's own (own), "for submission #21" for
// one made for it, "at WaitAll after submission #21" for one WaitAll
// made (wait).
func walkPoint(seq int, own, wait bool) string {
	switch {
	case wait:
		return fmt.Sprintf("at WaitAll after submission #%d", seq)
	case own:
		return fmt.Sprintf("of submission #%d", seq)
	}
	return fmt.Sprintf("for submission #%d", seq)
}

// transferLocked records that h's latest version goes from rank src to
// rank dst, and on those two ranks submits the detached tasks that send
// and receive it. d.mu is held.
func (d *Scheduler) transferLocked(ctx context.Context, h *Handle, src, dst int) error {
	h.hold(dst)
	d.xferSeq++ // every rank numbers the transfers alike
	if d.rank != src && d.rank != dst {
		return nil
	}
	lh, err := h.localHandle()
	if err != nil {
		return err
	}
	x := d.newXfer()
	x.h, x.data, x.peer, x.id, x.send = h, h.data, dst, d.xferSeq, true
	x.src, x.dst, x.seq, x.wait = src, dst, d.check.n-1, d.walkingWaitAll
	cl, mode := d.sendCl, scheduler.ModeR
	if d.rank == dst {
		x.peer, x.send = src, false
		cl, mode = d.recvCl, scheduler.ModeW
	}
	if err := d.local.Submit(ctx, cl, scheduler.Data(lh, mode), scheduler.WithArg(x), scheduler.OnDone(x.fn), scheduler.CancelOn(d.graph)); err != nil {
		// A task that Submit refused never runs; x is not put back
		// all the same (see submitLocal).
		return fmt.Errorf("dist: rank %d: transfer of %v: %w", d.rank, h, err)
	}
	return nil
}

// xfer is the argument of a send or receive task, and its callback
// (fn, made once per xfer). It comes from d's pool (newXfer) and goes
// back once its task has completed and the request it started, if any,
// has ended (refs).
type xfer struct {
	h *Handle
	// data is h's memory on this rank when the transfer was walked:
	// Flush and Unregister forget it (h.data), while the transfer's
	// task, which they wait for, still uses it.
	data any
	peer int
	id   uint64 // the transfer's number in the submission walk
	send bool   // this rank sends (else receives)
	// What names the transfer if its task is canceled: from src to dst,
	// walked in submission seq (in WaitAll if wait).
	src, dst, seq int
	wait          bool

	// While it runs: the buffer, when it started (for the trace), its
	// key in d.xfers and its task's done function (trackLocked).
	buf      comm.Buf
	start    time.Duration
	key      uint64
	taskDone func(error)
	// With the local scheduler recording tasks: the transfer's task's
	// trace number and, for a send, those of the tasks it waited for
	// (the merged trace's arrows from the producing task).
	task uint64
	deps []uint64

	d *Scheduler
	// refs counts the task (until its callback) and the request in
	// flight (until its completion has run): the last one puts x back.
	refs atomic.Int32
	// x.done, x.sent, x.received, made once per xfer.
	fn                 func(error)
	sentFn, receivedFn func(comm.Status, error)
}

// newXfer returns an xfer from d's pool, with one reference: its task's.
func (d *Scheduler) newXfer() *xfer {
	x, _ := d.xferPool.Get().(*xfer)
	if x == nil {
		x = &xfer{d: d}
		x.fn, x.sentFn, x.receivedFn = x.done, x.sent, x.received
	}
	x.refs.Store(1)
	return x
}

// release drops a reference to x; the last puts it back in the pool,
// without its references.
func (x *xfer) release() {
	if x.refs.Add(-1) != 0 {
		return
	}
	x.h, x.data, x.buf, x.taskDone, x.deps = nil, nil, comm.Buf{}, nil, nil
	x.d.xferPool.Put(x)
}

// what names the transfer for a stall report or an error: "sending H to
// rank R", "receiving H from rank R".
func (x *xfer) what() string {
	if x.send {
		return fmt.Sprintf("sending %v to rank %d", x.h, x.peer)
	}
	return fmt.Sprintf("receiving %v from rank %d", x.h, x.peer)
}

// done is the callback of x's task.
func (x *xfer) done(err error) {
	d := x.d
	if errors.Is(err, scheduler.ErrCanceled) {
		// It never started: a task of this rank that it depends on
		// failed (a reduction's combine of the workers' copies into
		// a partial result before its send), whose error names
		// neither the transfer nor the submission it serves. A
		// transfer's own errors name the transfer already.
		d.onTaskDone(err, x.canceledWhat)
	} else {
		d.onTaskDone(err, nil)
	}
	x.release()
}

// canceledWhat names a transfer whose task was canceled.
func (x *xfer) canceledWhat() string {
	if !x.send {
		return fmt.Sprintf("receiving %v from rank %d %s", x.h, x.src, walkPoint(x.seq, false, x.wait))
	}
	return fmt.Sprintf("sending %v to rank %d %s", x.h, x.dst, walkPoint(x.seq, false, x.wait))
}

// record keeps a finished transfer for the merged trace.
func (d *Scheduler) record(x *xfer, send bool, start time.Duration) {
	if !d.local.Recording() {
		return
	}
	d.trace.add(xferRecord{ID: x.id, Handle: x.h.String(), Peer: x.peer, Send: send,
		Start: int64(start), End: int64(time.Since(d.local.Epoch())), Task: x.task, Deps: x.deps})
}

// startSend sends the handle once the version is produced (Detached of
// sendCl).
func (d *Scheduler) startSend(t *scheduler.Task, done func(error)) {
	x := t.Arg.(*xfer)
	// A failure may complete the task (fail ends a send's task at once)
	// while this goes on using x, and the request's completion after
	// it: their reference, taken before the task can complete.
	x.refs.Add(1)
	if !d.track(done, x) {
		x.release()
		return
	}
	x.buf = x.h.raw(x.data)
	if d.local.Recording() {
		x.task, x.deps = t.TraceID(), t.TraceDeps()
	}
	x.start = time.Since(d.local.Epoch())
	req, err := d.c.Isend(x.buf, x.peer, x.h.id+1)
	if err != nil {
		x.finish(fmt.Errorf("%s: %w", x.what(), err))
		x.release()
		return
	}
	d.peers[x.peer].msgsSent.Add(1)
	d.peers[x.peer].bytesSent.Add(int64(len(x.buf.Bytes)))
	d.prog.add(req, x.sentFn)
}

// sent completes a send once its request has ended.
func (x *xfer) sent(_ comm.Status, err error) {
	if err != nil {
		err = fmt.Errorf("%s: %w", x.what(), err)
	}
	x.d.record(x, true, x.start)
	x.finish(err)
	x.release()
}

// track registers the done function of a send's task, so that a
// failure can end it (its peer may never take part); x.finish completes
// it. It returns false if the scheduler already failed (done was called
// with the failure).
func (d *Scheduler) track(done func(error), x *xfer) bool {
	d.failMu.Lock()
	if err := d.failed; err != nil {
		d.failMu.Unlock()
		done(err)
		return false
	}
	d.trackLocked(done, x, nil, -1)
	d.failMu.Unlock()
	return true
}

// trackLocked registers x, a transfer in flight (req and from: a
// receive's request and source rank, from -1 for a send), whose task
// done completes: x.finish does, once; d.failMu is held.
func (d *Scheduler) trackLocked(done func(error), x *xfer, req comm.Request, from int) {
	d.nxfer++
	x.key, x.taskDone = d.nxfer, done
	d.xfers[x.key] = inflight{done: done, x: x, req: req, from: from}
}

// finish completes x's task with err, forgetting the transfer in flight
// (trackLocked) if a failure has not already.
func (x *xfer) finish(err error) {
	d := x.d
	d.failMu.Lock()
	if f, ok := d.xfers[x.key]; ok {
		d.endLocked(x.key, f)
	}
	d.failMu.Unlock()
	d.progressed.Add(1)
	x.taskDone(err)
}

// startRecv receives the handle into this rank's copy (Detached of
// recvCl). Its task ends when the request does, also after a failure,
// which cancels the receive (fail): the buffer is the task's until then.
func (d *Scheduler) startRecv(t *scheduler.Task, done func(error)) {
	x := t.Arg.(*xfer)
	if d.local.Recording() {
		x.task = t.TraceID()
	}
	x.start = time.Since(d.local.Epoch())
	// Posted under failMu: a failure comes before (and nothing is
	// posted) or finds the request to cancel.
	d.failMu.Lock()
	if err := d.failed; err != nil {
		d.failMu.Unlock()
		done(err)
		return
	}
	x.buf = x.h.raw(x.data)
	req, err := d.c.Irecv(x.buf, x.peer, x.h.id+1)
	if err != nil {
		d.failMu.Unlock()
		d.progressed.Add(1)
		done(fmt.Errorf("%s: %w", x.what(), err))
		return
	}
	d.trackLocked(done, x, req, x.peer)
	// The request's completion uses x, which a failure may complete
	// the task before (abandon ends a canceled receive's task at once):
	// its reference, taken before failMu lets a failure in.
	x.refs.Add(1)
	d.failMu.Unlock()
	d.prog.add(req, x.receivedFn)
}

// received completes a receive once its request has ended.
func (x *xfer) received(st comm.Status, err error) {
	d := x.d
	switch {
	case errors.Is(err, comm.ErrCanceled):
		// Canceled by the failure, which is the task's error:
		// nothing was received.
		err = d.failure()
	case err == nil && st.Count != x.h.rows*x.h.cols:
		err = fmt.Errorf("%s: %w: %d elements for %v of %d", x.what(), comm.ErrMismatch, st.Count, x.h, x.h.rows*x.h.cols)
	case err != nil:
		err = fmt.Errorf("%s: %w", x.what(), err)
	default:
		d.peers[x.peer].msgsRecv.Add(1)
		d.peers[x.peer].bytesRecv.Add(int64(len(x.buf.Bytes)))
	}
	d.record(x, false, x.start)
	x.finish(err)
	x.release()
}
