package flow

import (
	"github.com/flowdedup/flowdedup/mix"
)

// Hash returns the 64-bit xxh3 hash of k keyed by seed: XXH3-64 with a
// seed, as github.com/zeebo/xxh3's HashSeed computes it, of the encoding
// below.
//
// The hash covers a canonical encoding of exactly the fields of the kind:
// one byte holding the kind (low nibble), the IPv6 flag (bit 4), the
// has-ports flag (bit 5), the network flag (bit 6) and the segment flag
// (bit 7, Key.Segment); then the source
// address, the destination address (4 bytes each for IPv4, 16 for IPv6,
// each only when the kind holds it); then, for a 5-tuple, the protocol byte
// and the two ports in network order. Keys of different kinds or families,
// and host and network keys, never share an encoding, and an IPv4 pair
// hashes 9 bytes rather than a padded 40. A network key's prefix length is
// not in the encoding: it moves the seed, to seed + length ×
// 0x9e3779b97f4a7c15, so that the networks 10.0.0.0/8 and 10.0.0.0/16
// hash apart (with the one encoding, their derived seeds differ). A key's
// segment (VNI) moves the seed likewise: the seed is seed + (vni × 256 +
// length) × 0x9e3779b97f4a7c15, the length 0 for a host key, the VNI 0
// without a segment, so that a key without either hashes as before. As
// the length is below 256 and the step odd, distinct (VNI, length) pairs
// give distinct seeds. The
// encoding and so the hash values are stable across runs and releases: a
// given seed reproduces them.
//
// The seed should be secret and random per run (docs/architecture.md, the
// data path, step 3): an attacker who cannot predict the hash cannot craft
// keys that collide in a filter to hide flows.
//
// All 64 bits are usable: filters may take bucket indexes from the high bits
// and fingerprints from the low bits. Code that also derives a shard from the
// hash must use [ShardOf], not the raw bits.
//
// Hash does not allocate, nor write the encoding to memory: it computes
// XXH3 from the key's fields (see hashFields). Network keys take the host
// keys' code (the length moves the seed, rather than add a byte to the
// encoding) because the host paths are written for the registers: network
// paths in the same function made the compiler spill and give it a stack
// frame, which every host key paid for (docs/decisions/key-hash.md).
func (k Key) Hash(seed uint64) uint64 { return HashKey(&k, seed) }

// HashKey returns k.Hash(seed) without copying the key, for the
// per-packet path: a Key just written field by field by Decode and then
// copied whole, as a call of Hash on it does, is read back with wide loads
// that the CPU cannot serve from its pending narrow stores, and stalls
// until they reach the cache (in the pipeline's producer, passing keys by
// value cost about a third of the time of a packet).
func HashKey(k *Key, seed uint64) uint64 { return hashFields(k, seed) }

// prefixSeedStep is what each bit of a network key's prefix length adds to
// the seed: 2^64 divided by the golden ratio, odd, so that the 129 lengths
// give 129 seeds spread over the whole range.
const prefixSeedStep = 0x9e3779b97f4a7c15

// shardSalt is an arbitrary constant (the first fraction digits of pi) xored
// into the hash before ShardOf mixes it, so that the shard is not the
// splitmix64 finaliser of the hash itself, which a filter may well compute to
// derive its own secondary indexes.
const shardSalt = 0x243f6a8885a308d3

// ShardOf maps the hash h of a key to a shard in [0, n). It returns 0 when
// n <= 1.
//
// Filters consume all 64 bits of h, so the shard must not be a slice of those
// bits: were it, say, the top bits of h (what a multiply-shift reduction of h
// itself would pick), every key reaching shard i would share those top bits,
// each shard's filter would only ever index 1/n of its buckets, and its error
// rates would silently worsen. ShardOf therefore first remixes h with a
// bijective 64-bit finaliser (splitmix64's, mix.Mix64, after xoring a salt)
// so that every output bit depends on every bit of h, then reduces the mixed
// value to [0, n) with Lemire's multiply-shift (mix.Reduce: the high word of
// mixed*n), which needs no division. Knowing the shard of a key then tells nothing about the bits its
// filter reads; TestShardOfIndependent checks it, and that the unmixed top
// bits would fail.
func ShardOf(h uint64, n int) int {
	if n <= 1 {
		return 0
	}
	return mix.Reduce(mix.Mix64(h^shardSalt), n)
}
