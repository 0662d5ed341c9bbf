// Package sketch counts distinct flow keys with mergeable HyperLogLogs.
//
// An [HLL] estimates how many distinct keys it was given, in 2^p bytes,
// with a relative standard error of about 1.04/sqrt(2^p): 0.81% at the
// default precision 14 (16 KiB), whatever the number of keys. HLLs of the
// same precision and seed merge: the merge of the HLLs of several key sets
// is, register for register, the HLL of their union. That is what makes the
// distinct count of a window summary (record.WindowSummary's
// DistinctEstimate and Sketch) add up across the pipeline's workers, across
// windows, and across the routers of a fleet (package netwide), where
// adding exact per-router counts would count a key once per router.
//
// The registers and the estimator are github.com/axiomhq/hyperloglog's
// (LogLog-Beta: Qin, Kim, Tung, "LogLog-Beta and More: A New Algorithm for
// Cardinality Estimation Based on LogLog Counting", 2016), always in its
// dense form, so that inserting never allocates and equal key sets give
// byte-equal registers. This package adds what a fleet needs on top:
//
//   - Keys are hashed under a seed ([KeyHash], flow.Key.Hash: xxh3 of flow's
//     stable key encoding), the same on every router, unlike the filters'
//     per-run secret. [DefaultSeed] is public; a seed kept secret across the
//     fleet stops outsiders from crafting keys that skew the count.
//   - The binary form ([HLL.MarshalBinary]) carries a versioned header with
//     the precision and a fingerprint of the seed ([Fingerprint]; never the
//     seed), and DEFLATE-compressed registers. [HLL.Merge] of HLLs of
//     different seeds or precisions fails with [ErrSeedMismatch] or
//     [ErrPrecisionMismatch] instead of returning a wrong number.
//   - [HLL.UnmarshalBinary] takes untrusted bytes: it checks every field,
//     bounds the decompressed size, and fails with [ErrFormat], never a
//     panic (FuzzUnmarshalBinary).
//
// # Lifecycle
//
// [New] allocates an HLL's registers once; [HLL.InsertKeys], [HLL.Merge],
// [HLL.Estimate] and [HLL.Reset] then allocate nothing, so one HLL serves
// window after window. An HLL is not safe for concurrent use: the pipeline
// gives each worker its own and merges them when a window closes. An HLL
// decoded from bytes knows its seed's fingerprint but not the seed: it can
// be merged, estimated and encoded, not given keys.
package sketch
