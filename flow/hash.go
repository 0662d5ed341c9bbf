package flow

import (
	"encoding/binary"
	"math/bits"

	"github.com/flowdedup/flowdedup/internal/simd"
	"github.com/flowdedup/flowdedup/mix"
)

// Hash returns the 64-bit xxh3 hash of k keyed by seed: XXH3-64 with a
// seed, as github.com/zeebo/xxh3's HashSeed computes it, of the encoding
// below.
//
// The hash covers a canonical encoding of exactly the fields of the kind:
// one byte holding the kind (low nibble), the IPv6 flag (bit 4), the
// has-ports flag (bit 5) and the network flag (bit 6); then the source
// address, the destination address (4 bytes each for IPv4, 16 for IPv6,
// each only when the kind holds it); then, for a 5-tuple, the protocol byte
// and the two ports in network order. Keys of different kinds or families,
// and host and network keys, never share an encoding, and an IPv4 pair
// hashes 9 bytes rather than a padded 40. A network key's prefix length is
// not in the encoding: it moves the seed, to seed + length ×
// 0x9e3779b97f4a7c15, so that the networks 10.0.0.0/8 and 10.0.0.0/16
// hash apart (with the one encoding, their derived seeds differ). The
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

// HashKeys sets hashes[i] to HashKey(&keys[i], seed) for every key: the
// hash of a batch. The answers are HashKey's, bit for bit; only the time
// differs. In the GOEXPERIMENT=simd build on a CPU with AVX-512, a batch
// whose keys are all IPv4 source or destination keys (host or network:
// the 5-byte encodings of XXH3's 4-to-8-byte path) has the words of its
// keys assembled one key at a time and XXH3's finaliser run over the
// batch eight keys at a time (internal/simd's RRMXMX); other batches, and
// every other build, hash one key at a time. It panics if hashes is
// shorter than keys, before it writes anything. It does not allocate.
func HashKeys(keys []Key, seed uint64, hashes []uint64) {
	if len(hashes) < len(keys) {
		panic("flow: HashKeys: hashes is shorter than keys")
	}
	hashes = hashes[:len(keys)]
	if !simd.Vector() {
		for i := range keys {
			hashes[i] = hashFields(&keys[i], seed)
		}
		return
	}
	// The words of the keys on the 4-to-8-byte path; the hash of the
	// others.
	mixed := false
	for i := range keys {
		k := &keys[i]
		if !on4to8Path(k) {
			hashes[i] = hashFields(k, seed)
			mixed = true
			continue
		}
		hashes[i] = len4to8Word(k, seed)
	}
	if !mixed {
		simd.RRMXMX(hashes, hashes, 5)
		return
	}
	for i := range keys {
		if on4to8Path(&keys[i]) {
			simd.RRMXMX(hashes[i:i+1], hashes[i:i+1], 5)
		}
	}
}

// on4to8Path is whether k's encoding is 5 bytes, hashed by XXH3's path for
// 4 to 8 bytes: an IPv4 source or destination key.
func on4to8Path(k *Key) bool {
	return k.flags&flagV6 == 0 && (k.kind == KeySrc || k.kind == KeyDst)
}

// len4to8Word is, for a key on the 4-to-8-byte path, the keyed word whose
// rrmxmx is its hash: what hashFields and xxh3Len4to8 compute before their
// first rotation, for the 5 bytes of the kind byte and the address.
func len4to8Word(k *Key, seed uint64) uint64 {
	if k.flags&flagPrefix != 0 {
		seed += uint64(k.bits) * prefixSeedStep
	}
	a := &k.src
	if k.kind == KeyDst {
		a = &k.dst
	}
	addr := uint64(binary.LittleEndian.Uint32(a[:4]))
	lo := uint64(byte(k.kind)|k.flags<<4) | addr<<8
	seed ^= uint64(bits.ReverseBytes32(uint32(seed))) << 32
	// first = bytes 0-3 = uint32(lo), last = bytes 1-4 = addr.
	return (addr | uint64(uint32(lo))<<32) ^ (xxhSecret008 ^ xxhSecret016 - seed)
}
