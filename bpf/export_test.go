//go:build linux && !(mips || mips64 || ppc64 || s390x)

package bpf

// SetClockOffset sets the offset the program adds to CLOCK_BOOTTIME, as
// SyncClock does with the true one, so that tests can move the program's
// clock across window boundaries.
func (o *Objects) SetClockOffset(ns int64) error { return o.setClockOffset(ns) }

// ClockOffset returns the true offset SyncClock would set.
func ClockOffset() (int64, error) { return clockOffset(nil) }

// LoadSpec returns the compiled object's CollectionSpec.
var LoadSpec = loadXdp

// Row is a prefilter row (struct fd_row).
type Row = xdpFdRow

// PrefilterRows returns the number of rows of each CPU's prefilter (1 when
// the prefilter is off) and CPU cpu's rows.
func (o *Objects) PrefilterRows(cpu int) ([]Row, error) {
	n := o.prefilter.MaxEntries()
	rows := make([]Row, n)
	var vals []xdpFdRow
	for i := range n {
		if err := o.prefilter.Lookup(i, &vals); err != nil {
			return nil, err
		}
		rows[i] = vals[cpu]
	}
	return rows, nil
}
