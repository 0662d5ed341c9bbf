package pipeline

import "github.com/flowdedup/flowdedup/mix"

// observerHash makes the flow hash h of a key seen by observer o (not 0;
// capture.Packet.ObserverID) the hash of the pair: a key two observers saw
// hashes apart, so each observer's keys are deduplicated on their own and
// a key is reported once per observer. For a given observer the map from
// h is a bijection (xor with a constant, then splitmix64's finaliser), so
// the bits the filters and ShardOf read stay as uniform as h's.
func observerHash(h uint64, o uint32) uint64 {
	return mix.Mix64(h ^ uint64(o)*0x9e3779b97f4a7c15)
}
