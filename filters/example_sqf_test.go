package filters_test

import (
	"fmt"

	"github.com/flowdedup/flowdedup/filters"
)

// An SQF of 1 KiB with 2 buckets per row and signatures of r'=3 bits of an
// r=8-bit remainder followed by its popcount: sigma = 3 + 4 = 7 bits, so
// 8192/(2*7) = 585 rows.
func ExampleSQF() {
	f, err := filters.New("sqf:mem=1KiB,buckets=2,r=8,rprime=3", 1)
	if err != nil {
		panic(err)
	}
	s := f.(*filters.SQF)
	fmt.Printf("%v: %d rows of %d buckets of %d bits = %d bits\n", s, s.Rows(), s.Buckets(), s.SignatureBits(), s.SizeBits())

	// Hashes come from the caller's keyed hash of a flow key.
	a, b := uint64(0x9c4f_1b2e_77d0_3a51), uint64(0x1e8a_6c03_5bf2_94d7)
	fmt.Println(f.Observe(a), f.Observe(b), f.Observe(a))
	// Output:
	// sqf:mem=1KiB,buckets=2,r=8,rprime=3: 585 rows of 2 buckets of 7 bits = 8190 bits
	// false false true
}

// An ISQF splits its memory between m tables: here 3 tables of
// 8192/(3*1*3) = 910 rows of one 3-bit signature (the defaults r=2, r'=1,
// k=1). An element is stored in all three and found in any.
func ExampleISQF() {
	f, err := filters.New("isqf:mem=1KiB", 1)
	if err != nil {
		panic(err)
	}
	g := f.(*filters.ISQF)
	fmt.Printf("%v: %d tables of %d rows = %d bits\n", g, g.Tables(), g.Rows(), g.SizeBits())
	a := uint64(0x9c4f_1b2e_77d0_3a51)
	fmt.Println(f.Observe(a), f.Observe(a))
	// Output:
	// isqf:mem=1KiB,buckets=1,r=2,rprime=1,tables=3: 3 tables of 910 rows = 8190 bits
	// false true
}
