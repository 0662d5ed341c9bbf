package filters_test

import (
	"fmt"

	"github.com/flowdedup/flowdedup/filters"
)

// An SBF sized for a 10% false-positive bound: P comes from Eq. 17, rounded
// up so that the bound (Eq. 8) holds.
func ExampleSBF() {
	f, err := filters.New("sbf:mem=64KiB,max=1,k=2,fps=0.1", 1)
	if err != nil {
		panic(err)
	}
	s := f.(*filters.SBF)
	fmt.Println(s)
	fmt.Printf("%d cells, K=%d, P=%d, FP bound %.4f\n", s.Cells(), s.K(), s.P(), s.FPBound())

	// Hashes come from the caller (flow.Key.Hash in the pipeline).
	fmt.Println(s.Observe(0x9e3779b97f4a7c15), s.Observe(0x9e3779b97f4a7c15))
	// Output:
	// sbf:mem=64KiB,max=1,k=2,p=5
	// 524288 cells, K=2, P=5, FP bound 0.0816
	// false true
}
