// Package filters holds the streaming duplicate filters of flowdedup: the
// ones of the papers in shared/papers (SBF, QHT and its variants, ...) and
// their baselines (Bloom, LRU buffering, an exact set).
//
// Every filter implements Filter over precomputed 64-bit keyed hashes: the
// caller hashes a flow key once (flow.Key.Hash) and the filter derives the
// cells it needs from that hash. Filters keep their state in flat []uint64
// words sized once by New; Observe allocates nothing (Exact, the ground
// truth with unbounded memory, allocates only when it grows).
//
// A filter is built from a spec, name[:key=value,...], by New; String gives
// the canonical spec back. A Filter is owned by one goroutine: the pipeline
// gives each worker its own shard.
//
// Hash bits: a filter may use all 64 bits of the hash it is given. Callers
// that also shard by hash must derive the shard from a remix of the hash
// (see flow.Key.Hash and the pipeline) so filters see unbiased rows.
package filters
