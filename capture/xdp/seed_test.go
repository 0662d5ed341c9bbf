package xdp

import "testing"

// PrefilterSeed is the first output of splitmix64 seeded with the run's
// seed; the expected values are those of the reference splitmix64.c (also
// Rosetta Code's for seed 1234567), and what flowdedup run derived before
// the derivation moved here, so a --seed keeps reproducing old runs.
func TestPrefilterSeed(t *testing.T) {
	for _, c := range []struct{ seed, want uint64 }{
		{0, 0xe220a8397b1dcdaf},
		{1234567, 6457827717110365317},
		{0xffffffffffffffff, 0xe4d971771b652c20},
	} {
		if got := PrefilterSeed(c.seed); got != c.want {
			t.Errorf("PrefilterSeed(%#x) = %#x, want %#x", c.seed, got, c.want)
		}
	}
}
