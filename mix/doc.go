// Package mix is the project's one home for hash mixing and seeded
// randomness: the splitmix64 finaliser, the multiply-shift range reduction,
// three small seeded generators and two Zipf samplers. Everything that must
// be reproducible from a seed (synthetic captures, evaluation streams, the
// filters' own random choices, derived seeds) draws from here, so that a
// constant or an algorithm is written once.
//
// The generators are value types with no allocation and no locking; each is
// used by one goroutine. None is cryptographic. Their sequences are fixed by
// this package, not by the Go release: flowdedup gen's output and eval's
// results for a given seed depend on them, and the tests pin them with
// known-answer vectors from the reference C implementations.
//
//   - [SplitMix] is Vigna's splitmix64: eval's synthetic streams.
//   - [PCG] is math/rand/v2's PCG source with the draws below fixed here:
//     flowdedup gen.
//   - [Wyrand] is Wang Yi's wyrand, the fastest of the three: the filters'
//     own random choices on their hot paths.
//
// The Zipf laws: [Zipf] samples by rejection-inversion in constant memory
// for any universe (eval's streams of up to 2^63 keys); [NewZipfTable] builds
// a Walker alias table ([Alias]), whose draws cost two uniforms and which
// needs memory for every rank (gen's popularity of at most gen.MaxFlows
// flows). They are two methods because each one's draws fix outputs that
// must not change: gen's captures in testdata/pcaps and eval's results.
//
// Mix64, Reduce, the generators' Uint64 and Float64, and Wyrand's IntN are
// small enough to be inlined where the filters and the pipeline call them
// per packet (go build -gcflags=-m shows it); Uint64N's rejection loop is
// not, and serves eval and gen.
package mix
