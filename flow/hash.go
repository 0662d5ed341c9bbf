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

// HashKeys sets hashes[i] to HashKey(&keys[i], seed) for every key: the
// hash of a batch. The answers are HashKey's, bit for bit; only the time
// differs. In the GOEXPERIMENT=simd build on a CPU with AVX-512, a batch of
// IPv4 keys all of one kind (host or network) has the words of XXH3's
// input assembled a key at a time and the rest of XXH3 run over the batch
// eight keys at a time: internal/simd's RRMXMX for source and destination
// keys (5 bytes, XXH3's 4-to-8-byte path), Fold9to16 for pairs and
// 5-tuples (9 and 14 bytes). Other batches (IPv6, kinds mixed), and every
// other build, hash one key at a time. It panics if hashes is shorter than
// keys, before it writes anything. It does not allocate.
func HashKeys(keys []Key, seed uint64, hashes []uint64) {
	if len(hashes) < len(keys) {
		panic("flow: HashKeys: hashes is shorter than keys")
	}
	hashes = hashes[:len(keys)]
	if len(keys) > 0 && simd.Vector() {
		switch first := &keys[0]; {
		case first.flags&flagV6 != 0:
		case first.kind == KeySrc || first.kind == KeyDst:
			if hashKeys4to8(keys, seed, hashes) {
				return
			}
		case first.kind == KeyPair || first.kind == Key5Tuple:
			if hashKeys9to16(keys, seed, hashes) {
				return
			}
		}
	}
	for i := range keys {
		hashes[i] = hashFields(&keys[i], seed)
	}
}

// hashKeys4to8 is HashKeys for IPv4 keys of the kind of keys[0], a source
// or destination kind, through simd.RRMXMX. It returns false, having
// written some of hashes, when a key is of another kind or family.
func hashKeys4to8(keys []Key, seed uint64, hashes []uint64) bool {
	kind := keys[0].kind
	for i := range keys {
		k := &keys[i]
		if k.kind != kind || k.flags&flagV6 != 0 {
			return false
		}
		if k.flags&flagPrefix != 0 {
			hashes[i] = len4to8Word(k, seed+uint64(k.bits)*prefixSeedStep)
		} else {
			hashes[i] = len4to8Word(k, seed)
		}
	}
	simd.RRMXMX(hashes, hashes, 5)
	return true
}

// len4to8Word is, for an IPv4 source or destination key, the keyed word
// whose rrmxmx is its hash: what hashFields and xxh3Len4to8 compute before
// their first rotation from the 5 bytes of the kind byte and the address,
// under seed (a network key's already moved by its prefix length).
func len4to8Word(k *Key, seed uint64) uint64 {
	a := &k.src
	if k.kind == KeyDst {
		a = &k.dst
	}
	addr := uint64(binary.LittleEndian.Uint32(a[:4]))
	head := uint64(byte(k.kind) | k.flags<<4)
	seed ^= uint64(bits.ReverseBytes32(uint32(seed))) << 32
	// first = bytes 0-3 (the head, then the address's first 3 bytes),
	// last = bytes 1-4 (the address).
	first := uint64(uint32(head | addr<<8))
	return (addr | first<<32) ^ (xxhSecret008 ^ xxhSecret016 - seed)
}

// hashChunk is how many keys hashKeys9to16 keys at a time: the second
// words of a chunk wait on its stack.
const hashChunk = 64

// hashKeys9to16 is HashKeys for IPv4 keys of the kind of keys[0], a pair
// or 5-tuple kind, through simd.Fold9to16. It returns false, having
// written some of hashes, when a key is of another kind or family.
//
// The words are the keyed first and last 8 bytes of the encoding that
// XXH3's 9-to-16-byte path folds, as hashFields and xxh3Len9to16 compute
// them (written out here rather than called: a function of two results
// is not inlined, and the call cost what the kernel saves).
func hashKeys9to16(keys []Key, seed uint64, hashes []uint64) bool {
	kind := keys[0].kind
	n := uint64(9)
	if kind == Key5Tuple {
		n = 14
	}
	var hi [hashChunk]uint64
	for start := 0; start < len(keys); start += hashChunk {
		chunk := keys[start:min(start+hashChunk, len(keys))]
		out := hashes[start : start+len(chunk)]
		his := hi[:len(chunk)]
		for i := range chunk {
			k := &chunk[i]
			if k.kind != kind || k.flags&flagV6 != 0 {
				return false
			}
			s := seed
			if k.flags&flagPrefix != 0 {
				s += uint64(k.bits) * prefixSeedStep
			}
			head := uint64(byte(k.kind) | k.flags<<4)
			src := uint64(binary.LittleEndian.Uint32(k.src[:4]))
			dst := uint64(binary.LittleEndian.Uint32(k.dst[:4]))
			first := head | src<<8 | dst<<40
			// A pair's bytes 1-8: the addresses.
			last := src | dst<<32
			if kind == Key5Tuple {
				// Bytes 6-13: the last 3 bytes of the destination,
				// the protocol, the ports in network order.
				tail := dst>>24 | uint64(k.proto)<<8 | uint64(bits.ReverseBytes16(k.sport))<<16 | uint64(bits.ReverseBytes16(k.dport))<<32
				last = first>>48 | tail<<16
			}
			out[i] = first ^ (xxhSecret024 ^ xxhSecret032 + s)
			his[i] = last ^ (xxhSecret040 ^ xxhSecret048 - s)
		}
		simd.Fold9to16(out, out, his, n)
	}
	return true
}
