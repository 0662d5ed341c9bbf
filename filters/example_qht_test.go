package filters_test

import (
	"fmt"

	"github.com/flowdedup/flowdedup/filters"
)

// A QHT of 1 KiB with 2 buckets of 4-bit fingerprints per row: 8192/(2*4) = 1024 rows.
// Until rows fill up it forgets nothing; once saturated on a uniform
// stream it answers DUPLICATE for k/S = 2/15 of unseen elements.
func Example_qht() {
	f, err := filters.New("qht:mem=1KiB,buckets=2,fpbits=4", 1)
	if err != nil {
		panic(err)
	}
	q := f.(*filters.QHT)
	fmt.Println(q, q.Rows(), "rows,", q.SizeBits(), "bits")

	// Hashes come from the caller's keyed hash of a flow key.
	a, b := uint64(0x9c4f_1b2e_77d0_3a51), uint64(0x1e8a_6c03_5bf2_94d7)
	fmt.Println(f.Observe(a), f.Observe(b), f.Observe(a))
	// Output:
	// qht:mem=1KiB,buckets=2,fpbits=4 1024 rows, 8192 bits
	// false false true
}
