package comm

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFingerprintPack(t *testing.T) {
	for _, f := range []Fingerprint{
		{},
		{Call: CallAllReduce, Type: Complex128, Op: BXor, Root: -1, Count: -1},
		{Call: CallScatter, Type: Uint8, Root: 1<<31 - 1, Count: 1 << 40},
		{Call: CallBcast, Type: Float64, Root: -7, Count: 0},
	} {
		assert.Equal(t, f, UnpackFingerprint(f.Pack()))
	}
}

func TestCheckFingerprints(t *testing.T) {
	base := Fingerprint{Call: CallAllReduce, Type: Float64, Op: Sum, Root: -1, Count: 4}
	require.NoError(t, CheckFingerprints([]Fingerprint{base, base, base}))
	require.NoError(t, CheckFingerprints(nil))

	cnt := base
	cnt.Count = 3
	err := CheckFingerprints([]Fingerprint{base, base, cnt, cnt})
	require.ErrorIs(t, err, ErrMismatch)
	var me *MismatchError
	require.True(t, errors.As(err, &me))
	assert.Equal(t, "AllReduce", me.Op)
	assert.Equal(t, "count: rank 0 has 4, rank 2 has 3, rank 3 has 3", me.Detail)

	// The call is reported before anything else.
	other := Fingerprint{Call: CallBcast, Type: Int8, Root: 0, Count: 4}
	err = CheckFingerprints([]Fingerprint{base, other})
	require.True(t, errors.As(err, &me))
	assert.Equal(t, "call: rank 0 has AllReduce, rank 1 has Bcast", me.Detail)

	ty := base
	ty.Type = Int64
	err = CheckFingerprints([]Fingerprint{base, ty})
	require.True(t, errors.As(err, &me))
	assert.Equal(t, "datatype: rank 0 has float64, rank 1 has int64", me.Detail)
}

func TestChecks(t *testing.T) {
	var ae *ArgError
	require.ErrorAs(t, CheckRoot("Bcast", 2, 4, 4), &ae)
	assert.Equal(t, 2, ae.Rank)
	assert.Contains(t, ae.Error(), "root 4 is outside [0, 4)")
	assert.NoError(t, CheckRoot("Bcast", 0, 3, 4))
	assert.ErrorIs(t, CheckBuf("X", 0, Buf{Bytes: make([]byte, 3), Type: Int16}), ErrInvalidArg)
	assert.ErrorIs(t, CheckBuf("X", 0, Buf{}), ErrInvalidArg)
	assert.NoError(t, CheckBuf("X", 0, Buf{Type: Int16}))
	assert.ErrorIs(t, CheckOp("X", 0, Min, Complex64), ErrInvalidArg)
	assert.NoError(t, CheckOp("X", 0, LOr, Uint8))
	assert.ErrorIs(t, CheckCounts("X", 0, []int{1, 2}, 3, 3), ErrInvalidArg)
	assert.ErrorIs(t, CheckCounts("X", 0, []int{1, -1, 3}, 3, 3), ErrInvalidArg)
	assert.ErrorIs(t, CheckCounts("X", 0, []int{1, 1, 1}, 3, 4), ErrInvalidArg)
	assert.NoError(t, CheckCounts("X", 0, []int{1, 0, 3}, 3, 4))
	assert.NoError(t, CheckPeer("Recv", 0, AnySource, 2, true))
	assert.ErrorIs(t, CheckPeer("Send", 0, AnySource, 2, false), ErrInvalidArg)
	assert.NoError(t, CheckTag("Recv", 0, AnyTag, true))
	assert.ErrorIs(t, CheckTag("Send", 0, AnyTag, false), ErrInvalidArg)
	assert.NoError(t, CheckColor("Split", 0, Undefined))
	assert.ErrorIs(t, CheckColor("Split", 0, -2), ErrInvalidArg)
	assert.NoError(t, CheckSplit("Split", 0, Undefined, math.MinInt32))
	assert.NoError(t, CheckSplit("Split", 0, math.MaxInt32, math.MaxInt32))
	assert.ErrorIs(t, CheckSplit("Split", 0, -2, 0), ErrInvalidArg)
	assert.ErrorIs(t, CheckSplit("Split", 0, math.MaxInt32+1, 0), ErrInvalidArg)
	assert.ErrorIs(t, CheckSplit("Split", 0, 0, math.MinInt32-1), ErrInvalidArg)
	assert.ErrorIs(t, CheckRecv("AllReduce", 0, BufOf([]float64{1, 2}), BufOf([]float64{1})), ErrInvalidArg)
	assert.ErrorIs(t, CheckRecv("AllReduce", 0, BufOf([]float64{1}), BufOf([]int64{1})), ErrInvalidArg)
	assert.Nil(t, FirstErr(nil, nil))
}

// BenchmarkCheckFingerprints measures the agreement check on 16 equal
// fingerprints, the common case every collective pays.
func BenchmarkCheckFingerprints(b *testing.B) {
	fps := make([]Fingerprint, 16)
	for i := range fps {
		fps[i] = Fingerprint{Call: CallAllReduce, Type: Float64, Op: Sum, Root: -1, Count: 1 << 20}
	}
	for b.Loop() {
		if CheckFingerprints(fps) != nil {
			b.Fatal("mismatch")
		}
	}
}

func BenchmarkFingerprintPack(b *testing.B) {
	f := Fingerprint{Call: CallBcast, Type: Int32, Root: 3, Count: 1000}
	var sink [2]uint64
	for b.Loop() {
		sink = f.Pack()
		f.Count++
	}
	_ = UnpackFingerprint(sink)
}
