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
// # Traps in the papers, found while implementing them
//
// These add to the reading notes of docs/papers.md; each is tested where the
// filter is.
//
//   - SBF: P from fps is Eq. 17 rounded up, so the bound asked for holds
//     (fps=0.1 gives P=5; the paper truncates to 4, whose Eq. 8 is 11.1%).
//   - QHT: Theorem 4.1's FP_m is exact only for k=1: it assumes an arrival
//     evicts a random bucket even while its row has empty ones. Tests use an
//     exact Markov-chain value for k>1.
//   - SQF: the asymptotic FPR k/(2^r' sqrt(pi r)) that both papers give is
//     too low, since the popcount overlaps the reduced remainder
//     (sqrt(pi (r-r')) fits better; the exact value is a stationary-chain
//     sum, see sqf.go). ISQF's memory formula counts log r popcount bits
//     where ceil(log2(r+1)) are needed.
//   - ISQF: at equal total memory its FNR falls with m only when gaps are
//     short; with gaps longer than the capacity it rises with m.
//   - FP-SBF: Algorithm 3 evicts k cells, but Theorem 1 and Sec. 5 use L
//     cells; Eq. 21 (SBF's Eq. 17) assumes unit decrements, where FP-SBF
//     subtracts a random z, so L comes from an exact random-decrement stable
//     point instead (L=9 meets fps=0.1 at the defaults; Eq. 21 gives 33).
//     A fingerprint is cleared when its counter reaches 0, else an element
//     just inserted into an emptied cell is never found again. XOR-ed
//     fingerprints of shared cells match neither element: at equal memory
//     FP-SBF's FPR is far below SBF's but its FNR far above.
//   - BSBF family: the paper's Eq. 4.3 (stable fill 0.949) is wrong; BSBF's
//     fill settles at 0.618 (FPR 0.382) on a stream of new elements. BSBFSD
//     and BSBF with k=1 keep filling towards 1. RSBF's published numbers at
//     256 and 512 MB cannot come from Algorithm 1 (s exceeds the stream, so
//     nothing is ever reset and FNR must be 0).
//   - Blocked layouts: Putze et al.'s FPR uses the Bloom approximation
//     within a block, which at 512 bits is 1-2% of the rate low. For the
//     blocked SBF, Eq. 7 and 8 with m = a block's cells take a key's K
//     cells as distinct; among 170 cells (Max=7) that moves the stable
//     zero fraction by 0.9%.
//   - A2 and b_DBF are only cited by the QHT paper; a2.go and bdbf.go state
//     the reading implemented.
package filters
