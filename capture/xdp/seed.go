package xdp

import "github.com/flowdedup/flowdedup/mix"

// PrefilterSeed derives the in-kernel prefilter's hash key (Config.Seed)
// from a run's seed, the one that keys the user-space flow hash: the first
// output of splitmix64 seeded with it, mix.Mix64(seed + mix.Golden). So
// --seed reproduces a run's prefilter as well as its filters, while the two
// hashes stay unrelated: knowing one key tells nothing of the other.
func PrefilterSeed(seed uint64) uint64 { return mix.Mix64(seed + mix.Golden) }
