package comm

import "fmt"

// A Relation is how two communicators compare (MPI_Comm_compare).
type Relation uint8

// The relations, from the closest.
const (
	// Ident: the same communicator.
	Ident Relation = iota
	// Congruent: the same ranks in the same order, another communicator
	// (a Dup, a Split with one color and keys in rank order).
	Congruent
	// Similar: the same ranks in another order.
	Similar
	// Unequal: not the same ranks.
	Unequal
)

// String returns the relation's name, e.g. "congruent".
func (r Relation) String() string {
	switch r {
	case Ident:
		return "ident"
	case Congruent:
		return "congruent"
	case Similar:
		return "similar"
	case Unequal:
		return "unequal"
	}
	return fmt.Sprintf("Relation(%d)", uint8(r))
}

// Compare tells how a and b, two communicators of this rank on the same
// backend, relate (MPI_Comm_compare). It is local: no rank waits.
func Compare(a, b Comm) (Relation, error) {
	c, ok := a.(interface {
		Compare(other Comm) (Relation, error)
	})
	if !ok {
		return Unequal, fmt.Errorf("%w: Compare: %T cannot compare communicators", ErrInvalidArg, a)
	}
	return c.Compare(b)
}
