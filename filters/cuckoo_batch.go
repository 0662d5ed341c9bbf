package filters

var _ BatchObserver = (*Cuckoo)(nil)

// ObserveBatch is Observe over hashes in order, with both buckets of a
// stretch of hashes requested before they are observed (see
// BatchObserver). The relocations of a full table follow fingerprints
// read on the way, and are not predicted.
func (c *Cuckoo) ObserveBatch(hashes []uint64, dup []bool) {
	var buf lineBuf // zeroed once a batch, not once a stretch
	for st := range stretches(hashes, dup, c.SizeBits()) {
		n := 0
		for _, h := range st.ahead {
			i1 := int(h >> c.shift)
			n = c.prefetchBucket(&buf, n, i1)
			n = c.prefetchBucket(&buf, n, i1^c.alt(nonZeroFingerprint(h, c.fpMask)))
		}
		buf.flush(n)
		for i, h := range st.hashes {
			st.dup[i] = c.Observe(h)
		}
	}
}

// prefetchBucket queues the words of bucket i after the n queued in buf.
func (c *Cuckoo) prefetchBucket(buf *lineBuf, n, i int) int {
	bits := c.b * int(c.f)
	bit := i * bits
	return buf.words(n, c.cells.words, bit>>6, (bit+bits-1)>>6)
}
