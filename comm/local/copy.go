package local

// copyChunk bounds the length of one memmove call. Go's memmove on amd64
// switches to non-temporal stores (which bypass the cache) for copies of
// 1 MiB and more; for the message sizes of collectives, whose result the
// caller usually reads next and whose source often sits in a peer's cache,
// cached stores in pieces below that threshold were 1.5-2x faster here
// (2-core AMD EPYC VM, 1 MiB copies: 25 µs against 45 µs).
const copyChunk = 512 << 10

// copyBytes is copy(dst, src) in pieces of at most copyChunk bytes.
func copyBytes(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n <= copyChunk {
		return copy(dst, src)
	}
	for off := 0; off < n; off += copyChunk {
		end := min(off+copyChunk, n)
		copy(dst[off:end], src[off:end])
	}
	return n
}
