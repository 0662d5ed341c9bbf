// Package netwide merges the window summaries of many routers into
// network-wide distinct counts: the library under `flowdedup merge`.
//
// Each flowdedup run writes a summary per window (record.WindowSummary),
// with --summary-sketch the window's HyperLogLog of every key it saw
// (package sketch). The distinct keys of a fleet in a window are not the sum
// of the routers' distinct counts, since a flow crossing three routers is
// counted by each; nor are the distinct keys of an hour the sum of its
// minutes'. They are the estimate of the union of the sketches, which a
// merge computes exactly (register by register) and whose error is that of
// a single sketch: 0.81% at the default precision, whatever the number of
// routers and windows merged.
//
// A [Merger] takes [Summary] values one at a time (the caller decodes them
// from summary files) and groups them by window, or by period with
// [Options].By (periods aligned on the Unix epoch, as flowdedup's windows
// are; each window must lie within one period). [Merger.Groups] then gives
// each group's bounds, observers, number of summaries, merged estimate, and
// for comparison the sums of the routers' own counts. Memory is one sketch
// per group held, not per summary; a caller that gives the summaries in
// time order (merging its inputs on window start, as `flowdedup merge`
// does) calls [Merger.Flush] as it goes, which gives out the groups no
// later summary can join, so that only the open groups are held, however
// many windows the inputs span. [Options].MaxPrecision refuses sketches
// larger than the caller allows before they are decoded.
//
// Sketches made under different seeds or precisions cannot be merged:
// [Merger.Add] fails with sketch.ErrSeedMismatch or
// sketch.ErrPrecisionMismatch, naming both summaries, rather than return a
// wrong number; a summary without a sketch fails with [ErrNoSketch].
// Likewise summaries must count one key kind (--key, [Summary].Key), by
// host or by networks of one prefix length (--prefix, [Summary].Prefix):
// [Merger.Add] fails with [ErrKindMismatch], naming both kinds and
// summaries, for one that says another kind than those before it. A
// summary that does not say its kind (one written before summaries
// carried it) is accepted and taken to count the others' kind: the Merger
// counts them ([Merger.UnknownKind]) so that the caller can warn.
package netwide
