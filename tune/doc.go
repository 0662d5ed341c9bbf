// Package tune picks the duplicate filter, and its parameters, for a
// user's own traffic, window and memory per core: it replays a sample the
// way `flowdedup replay` would run it, with every filter family over a
// grid of its parameters, against exact ground truth, and ranks them by an
// objective. It is what `flowdedup tune` runs; Run does all of it, and
// Result.WriteText, WriteJSON and Plot render the answer.
//
// # Replay, exactly
//
// A capture is read once (package capture, several files in order as one
// capture) and reduced to its keyed frames, in order, each with its window
// and its truth: a key's first occurrence in its window is distinct, every
// later one a duplicate (by key, not by hash). Windows follow pipeline's
// producer with replay's settings: packet time, no lateness; a packet
// later than the open window opens its own (frames that do not parse move
// time too), a packet of an earlier window is late and not keyed. Under
// seed S each distinct key is hashed once (flow.Key.Hash(S)) and every
// element dealt to shard flow.ShardOf(hash, W); shard i's filter is
// filters.New(spec, S+i), cleared at each window boundary: replay's Seed
// and FilterSeed are both --seed. So the counts tune reports for a filter
// and a seed are exactly the errors `flowdedup replay --seed S` makes with
// it (a test checks this against the pipeline's records). FPR is false
// positives over distinct keys, FNR false negatives over duplicates, over
// all shards, windows and samples, as eval counts them. Stream specs
// (uniform:, zipf:, distinct:, file:) are one window each, materialised by
// package eval; a new seed is a new random stream.
//
// # Search
//
// The grid (Grid) spans each family's parameters that move its error
// rates, and the blocked layouts of bloom and sbf (bloom:blocked=1,
// sbf:blocked=1: one cache line per key), which count as families of their
// own from here on; the values and their reasons are beside them in
// grid.go. A
// bounded objective adds its bound to the parameters that are FP targets
// (sbf fps, a2 fpr, fpbuffer q).
//
// The coarse phase runs every grid point once, with the first seed, on a
// thinned sample: the keys whose remixed hash falls in 1/2^j of the range
// (all occurrences of a kept key are kept, so the truth is unchanged), with
// filters of 1/2^j of the memory, b_DBF's window (counted in arrivals)
// scaled likewise. 2^j is the smallest power of two that brings the sample
// to CoarseElements keys (2^18) without shrinking a filter below 8 KiB.
// Thinning, unlike a prefix, keeps the load per bit, the windows and the
// time span of the whole sample, as sharding itself does. Each family's
// best Keep (3) by the coarse score go on, plus replay's default filter at
// the same memory; a bounded objective is judged there with a slack of
// three binomial standard deviations, so that noise does not prune a
// filter that sits at the bound. The refine phase runs them on the whole
// sample with every seed (3), in parallel over the cores
// (Config.Parallelism), references first and then each family's best, so
// that what the budget cuts is the least promising.
//
// The budget (60 s) bounds both: the coarse phase starts no work past half
// of it, the refine phase none past all of it; what did not run is counted
// (Search.Unfinished) rather than waited for. A filter whose Observe is
// more than MaxSlowdown (50) times slower than replay's default filter, on
// the same keys right after it, four chunks in a row, is dropped (a
// saturated cuckoo filter kicks 500 times per new key): the ratio, unlike
// a time, holds on a loaded machine.
//
// # Ranking and confidence
//
// Objectives: min-errors minimises (FP + FN) / keys, the wrong records per
// key; min-fnr:fpr<=X minimises the mean FNR among the filters whose FPR
// is at most X on every seed (a filter over the bound ranks after all that
// meet it); min-fpr:fnr<=X likewise. Ties go to the lower other rate, then
// the faster filter. When the leading filters made exactly the same errors
// on every seed (typically none, with memory to spare), they run again on
// the first seed with 1/8, then 1/64, ... of the memory until the tie
// breaks: the pick is the one with the most headroom.
//
// Each rate is reported as mean ± sample standard deviation over the
// seeds, with min and max. The seeds are paired (all filters see the same
// hashes), so the pick and the runner-up are compared by a paired t-test
// on the per-seed differences of the objective, two-sided at 5%
// (Confidence): distinguishable when the pick wins on every seed and t
// exceeds Student's quantile. The seeds measure the randomness of the
// hashes and filters on this sample, not how the traffic itself may
// change.
//
// Memory: a capture's keys, one key id and truth flag per packet, and
// per seed 9 bytes per packet of dealt hashes (about 40 MB for a
// million-packet sample), plus the filters being run: Parallelism x
// Workers filters of Mem at once.
package tune
