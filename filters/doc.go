// Package filters holds the streaming duplicate filters of flowdedup: the
// ones of the papers (SBF: Deng & Rafiei, SIGMOD 2006; QHT and its
// variants: Géraud, Lombard-Platet & Naccache, arXiv:1901.04358, 2019; SQF:
// Dutta, Narang & Bera, PVLDB 6(8), 2013; ISQF: Che, Yang & Wang, IAJIT
// 17(5), 2020; FP-SBF: Singh & Batra, Computing and Informatics 37(6),
// 2018; RSBF/BSBF/BSBFSD/RLBSBF: Bera, Dutta, Narang & Bhattacherjee,
// arXiv:1212.3964, 2012) and their baselines (Bloom, LRU buffering,
// FPBuffering, a streaming cuckoo filter, A2, b_DBF, an exact set).
// docs/papers.md gives the full references and reading notes.
//
// Every filter implements Filter over precomputed 64-bit keyed hashes: the
// caller hashes a flow key once (flow.Key.Hash) and the filter derives the
// cells it needs from that hash. Filters keep their state in flat []uint64
// words sized once by New; Observe allocates nothing (Exact, the ground
// truth with unbounded memory, allocates only when it grows).
//
// Filters whose state outgrows the CPU's caches wait on memory for every
// cell they touch, one miss after the other. Those that implement
// BatchObserver (every family but a2, whose Observe keeps its few
// independent misses in flight by itself) observe a batch of hashes faster:
// they request the cache lines that the next hashes will touch before
// observing the current ones, so that many misses are in flight at once,
// and answer exactly as Observe one at a time would, leaving the same
// state. ObserveAll takes that path when there is one; the pipeline's
// workers call it on every batch they receive.
//
// bloom and sbf also come in a blocked layout (blocked=1: BlockedBloom,
// BlockedSBF, after Putze, Sanders & Singler, WEA 2007): all of a key's
// cells in one 64-byte cache line, so a key costs one cache miss, for
// state far larger than the caches; their FP rates are somewhat higher at
// the same memory.
//
// A filter is built from a spec, name[:key=value,...], by New; String gives
// the canonical spec back. A Filter is owned by one goroutine: the pipeline
// gives each worker its own shard. Reset makes a filter answer exactly as a
// new one with the same seed would, random choices included.
//
// Hash bits: a filter may use all 64 bits of the hash it is given. Callers
// that also shard by hash must derive the shard from a remix of the hash
// (flow.ShardOf) so filters see unbiased rows.
//
// Example, one filter deciding whether a source was seen before:
//
//	f, err := filters.New("qht:mem=1MiB,buckets=4,fpbits=12", seed)
//	k, err := flow.Parse(frame, flow.LinkEthernet, flow.KeySrc)
//	if !f.Observe(k.Hash(hashSeed)) {
//		// first time this source is seen
//	}
//
// The traps in the papers found while implementing them, each tested
// where its filter is, are in the repository's docs/papers.md.
package filters
