package sketch

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/axiomhq/hyperloglog"

	"github.com/flowdedup/flowdedup/flow"
)

// Precision bounds: an HLL has 2^p registers of one byte, and a relative
// standard error of about 1.04/sqrt(2^p).
const (
	MinPrecision     = 4
	MaxPrecision     = 18
	DefaultPrecision = 14 // 16 KiB, standard error 0.81%
)

// DefaultSeed is the sketch seed of a fleet that sets none: a fixed public
// constant (the first 64 bits of the fractional part of sqrt 2), so that
// sketches of routers left at the default merge. Being public, it lets
// anyone craft keys that inflate or hide from the estimate; a fleet that
// fears that sets a random secret seed of its own on every router.
const DefaultSeed uint64 = 0x6a09e667f3bcc908

// Errors. Merge and UnmarshalBinary wrap them with the values involved;
// match them with errors.Is.
var (
	// ErrPrecision: a precision outside [MinPrecision, MaxPrecision].
	ErrPrecision = errors.New("sketch: precision out of range")
	// ErrPrecisionMismatch: merging HLLs of different precisions.
	ErrPrecisionMismatch = errors.New("sketch: precisions differ")
	// ErrSeedMismatch: merging HLLs whose keys were hashed under different
	// seeds (their seed fingerprints differ): their union would count a
	// key once per seed.
	ErrSeedMismatch = errors.New("sketch: seeds differ")
	// ErrFormat: bytes that are not the binary form of an HLL.
	ErrFormat = errors.New("sketch: invalid binary form")
)

// HLL is a HyperLogLog of flow keys: an estimate of how many distinct keys
// were inserted, mergeable with every HLL of the same precision and seed.
// Its registers are those of github.com/axiomhq/hyperloglog, always in its
// dense representation (2^p bytes): inserting into it never allocates, and
// equal key sets give equal registers whatever the order of insertion,
// merging or reset.
//
// An HLL made by New knows its seed and can hash keys; one decoded by
// UnmarshalBinary knows only the seed's fingerprint (the seed may be a
// fleet secret, and is never written): it can be merged, estimated and
// encoded, and takes hashes through InsertHash but not keys. The zero HLL is
// empty with no precision: UnmarshalBinary fills it, and Merge into it
// adopts the other's precision and seed.
//
// An HLL is not safe for concurrent use.
type HLL struct {
	sk     *hyperloglog.Sketch // dense; nil in the zero HLL
	p      uint8
	fp     uint64 // Fingerprint of the seed
	seed   uint64 // valid when seeded
	seeded bool
}

// New returns an empty HLL of 2^precision registers whose keys are hashed
// under seed. It allocates the registers, 2^precision bytes, once.
func New(precision uint8, seed uint64) (*HLL, error) {
	if precision < MinPrecision || precision > MaxPrecision {
		return nil, fmt.Errorf("%w: %d not in [%d, %d]", ErrPrecision, precision, MinPrecision, MaxPrecision)
	}
	sk, err := hyperloglog.NewSketch(precision, false)
	if err != nil {
		return nil, fmt.Errorf("sketch: %w", err)
	}
	return &HLL{sk: sk, p: precision, fp: Fingerprint(seed), seed: seed, seeded: true}, nil
}

// fingerprintDomain separates the fingerprint from any other SHA-256 of a
// seed: it names what is fingerprinted and the key hash (format version).
const fingerprintDomain = "flowdedup sketch seed, keys hashed by flow.Key.Hash (v1)\x00"

// Fingerprint returns the fingerprint of seed that HLLs carry in their
// binary form: the first 64 bits of SHA-256 over a domain string and the
// seed. It tells whether two sketches were made under the same seed without
// telling the seed; a seed is only as secret as it is random, since anyone
// can try every seed of a small space against a fingerprint.
func Fingerprint(seed uint64) uint64 {
	var b [len(fingerprintDomain) + 8]byte
	copy(b[:], fingerprintDomain)
	binary.BigEndian.PutUint64(b[len(fingerprintDomain):], seed)
	sum := sha256.Sum256(b[:])
	return binary.BigEndian.Uint64(sum[:8])
}

// KeyHash is the hash under which key k goes into an HLL of the given seed:
// flow.Key.Hash (xxh3 over the key's canonical encoding), which flow keeps
// stable across runs and releases, so that every router hashes a key alike.
// It differs from the filters' hash only by its seed: the filters' seed is a
// per-run secret, this one is shared by a fleet.
//
// Its cost is most of what a sketch adds per key (measured on a loaded
// 2-core VM, CPU time: xxh3 about 17 ns, the register update about 6, when
// flow.Key.Hash still wrote the encoding to memory to hash it; flow now
// computes the same XXH3 from the key's fields, in 4 to 7 ns). A cheaper
// hash was tried and not taken: flow.Key's words are reachable only
// through AppendBinary, which alone costs 11 ns, so a seeded multiply-mix of
// them would save some 5 ns at the price of a hash of our own to keep
// uniform and stable; and reusing the producer's flow hash is unsound, as
// its seed is a per-run secret (deriving the filters' hash from this one
// instead would let anyone who knows a public sketch seed collide keys in
// the filters).
func KeyHash(seed uint64, k *flow.Key) uint64 { return k.Hash(seed) }

// Precision returns p: the HLL has 2^p registers. 0 for the zero HLL.
func (h *HLL) Precision() uint8 { return h.p }

// Fingerprint returns the fingerprint of the HLL's seed (see Fingerprint).
func (h *HLL) Fingerprint() uint64 { return h.fp }

// mustSeed panics on an HLL that cannot hash keys: a programming error, as
// inserting keys hashed under an unknown seed would give a wrong estimate.
func (h *HLL) mustSeed() {
	if !h.seeded {
		panic("sketch: inserting keys into an HLL not made by New (its seed is unknown)")
	}
}

// Insert adds key k, hashed under the HLL's seed. The HLL must come from
// New.
func (h *HLL) Insert(k *flow.Key) {
	h.mustSeed()
	h.sk.InsertHash(flow.HashKey(k, h.seed))
}

// InsertKeys adds every key of keys, hashed under the HLL's seed; it does
// not allocate. The HLL must come from New.
func (h *HLL) InsertKeys(keys []flow.Key) {
	h.mustSeed()
	sk, seed := h.sk, h.seed
	for i := range keys {
		sk.InsertHash(flow.HashKey(&keys[i], seed))
	}
}

// InsertHash adds a key by its hash, which must be KeyHash under the seed
// the HLL was made with: a hash under another seed counts its key as a
// different one.
func (h *HLL) InsertHash(x uint64) {
	if h.sk == nil {
		panic("sketch: InsertHash into the zero HLL")
	}
	h.sk.InsertHash(x)
}

// Estimate returns the estimated number of distinct keys inserted (the
// LogLog-Beta estimator of github.com/axiomhq/hyperloglog), 0 for an empty
// or zero HLL. It scans the registers and does not allocate.
func (h *HLL) Estimate() uint64 {
	if h.sk == nil {
		return 0
	}
	return h.sk.Estimate()
}

// Reset empties the HLL, keeping its registers' memory, precision and seed.
func (h *HLL) Reset() {
	if h.sk != nil {
		h.sk.Reset()
	}
}

// Merge adds the keys of o to h: afterwards h's registers are those of an
// HLL of the union of both key sets. It fails, leaving h unchanged, with
// ErrPrecisionMismatch or ErrSeedMismatch when the two differ in precision
// or seed. A zero h adopts o's precision and seed; a zero o is empty.
func (h *HLL) Merge(o *HLL) error {
	switch {
	case o.sk == nil:
		return nil
	case h.sk == nil:
		*h = *o.Clone()
		return nil
	case h.p != o.p:
		return fmt.Errorf("%w: %d and %d", ErrPrecisionMismatch, h.p, o.p)
	case h.fp != o.fp:
		return fmt.Errorf("%w: fingerprints %016x and %016x", ErrSeedMismatch, h.fp, o.fp)
	}
	if err := h.sk.Merge(o.sk); err != nil {
		return fmt.Errorf("sketch: %w", err)
	}
	return nil
}

// Clone returns a deep copy of h.
func (h *HLL) Clone() *HLL {
	c := *h
	if h.sk != nil {
		c.sk = h.sk.Clone()
	}
	return &c
}

// Equal reports whether h and o have the same precision, seed fingerprint
// and registers: whether they count the same keys alike. Two zero HLLs are
// equal. It allocates (it compares the encoded registers); not for hot
// paths.
func (h *HLL) Equal(o *HLL) bool {
	if h.p != o.p || h.fp != o.fp || (h.sk == nil) != (o.sk == nil) {
		return false
	}
	if h.sk == nil {
		return true
	}
	a, err1 := h.sk.MarshalBinary()
	b, err2 := o.sk.MarshalBinary()
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}
