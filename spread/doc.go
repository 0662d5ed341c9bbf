// Package spread finds, in each window, the hosts that appear in the most
// distinct keys: the sources that contacted the most distinct destinations
// (fan-out: a scanner, a worm, a misconfigured client) and the destinations
// contacted by the most distinct sources (fan-in: the victim of a flood, a
// service going viral). Such hosts are the superspreaders of Venkataraman,
// Song, Gibbons and Blum, "New Streaming Algorithms for Fast Detection of
// Superspreaders" (NDSS 2005).
//
// flowdedup reports each distinct key once per window, so a source's
// fan-out in a window is the number of times it appears in that window's
// stream of distinct pairs: the spread problem becomes the frequent-items
// problem on that stream. [Counter] solves it with the Space-Saving
// algorithm of Metwally, Agrawal and El Abbadi, "Efficient Computation of
// Frequent and Top-k Elements in Data Streams" (ICDT 2005): M counters,
// each with an item, a count and an error. An item already counted is
// incremented; a new one takes a free counter, or, when all M are taken,
// the counter with the smallest count c, whose count becomes c+1 and whose
// error becomes c.
//
// The guarantee, for a stream of n items given to a Counter of M counters
// (proved in the paper): every item's count D never
// undercounts and overcounts by at most its error E, D-E ≤ true ≤ D; E is
// at most the smallest count, which is at most n/M; and every item whose
// true count exceeds n/M holds a counter. With M at least the number of
// distinct items, nothing is ever replaced and every E is 0: the counts are
// exact.
//
// This implementation is a stream-summary (Metwally et al., section 3.2)
// laid out in arrays: the counters sorted by count, largest first, in one
// array; a bucket per run of equal counts, giving its bounds in that array;
// and an open-addressing hash table from item to counter. An increment
// swaps the counter with the first of its bucket and moves the bucket
// boundary: O(1), and no allocation. All memory is taken by [New]: about
// [BytesPerCounter] bytes per counter, whatever the stream.
package spread
