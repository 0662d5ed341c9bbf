// Package eval measures streaming duplicate filters against ground truth.
//
// A Stream is materialised once per run into the keyed 64-bit hashes the
// filters observe and, for each element, whether an equal element came
// before it (the ground truth, from an exact set over the elements
// themselves, not their hashes). Every filter of a run then observes the same
// hashes, so their error rates are directly comparable and ns_per_op times
// Observe alone.
//
// FPR counts false positives over distinct elements, FNR false negatives
// over duplicates, as the papers do (docs/papers.md lists them).
package eval
