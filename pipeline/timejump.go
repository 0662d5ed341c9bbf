package pipeline

import (
	"math"
	"time"

	"github.com/flowdedup/flowdedup/capture"
)

// minTimeJump is the least jump of packet time that screen holds a packet
// for: an hour, or two windows and the lateness when that is longer.
// Gaps that long are rare in a capture, and holding costs only a copy of
// one packet unless the packet after it goes back.
const minTimeJump = time.Hour

// screen guards packet-time windows against a lone wrong timestamp: a
// packet whose time is more than p.jump ahead of both its neighbours'
// (one 2035 packet in a 2026 capture) is counted as late for reason
// "time_jump", neither keyed nor moving the clock. Without the guard that
// one packet would close every open window and make everything after it
// late. So a packet more than p.jump past the newest time seen (or the
// first packet of all) is held instead of handled, until the next packet
// says: if the next is more than p.jump behind it, the held packet is the
// outlier; otherwise the jump was real (a gap in the capture, the next
// file of a set) and the held packet is handled, one packet later than it
// came, with the same result as without the guard. Two wrong packets in a
// row are not caught: the second confirms the first. At the end of the
// input, on a quiet pipe and on stop, a held packet is handled (release).
//
// screen is called for a packet that may jump (its time is at or past
// p.next) or when a packet is held; it reports whether pkt is to be
// handled now.
func (p *producer) screen(pkt *capture.Packet) bool {
	if p.held {
		p.held = false
		if !p.jumps(pkt.TimeNs, p.hold.TimeNs) {
			p.packet(&p.hold)
		} else {
			c := p.current()
			c.packets++
			c.late[lateJump]++
		}
		if pkt.TimeNs < p.next {
			return true
		}
	}
	if p.hi != winUnknown {
		if newest := p.hiCounts.lastNs; newest == math.MinInt64 || !p.jumps(newest, pkt.TimeNs) {
			return true // an ordinary step (hi is the newest window)
		}
	}
	p.held = true
	p.holdBuf = append(p.holdBuf[:0], pkt.Data...)
	p.hold = *pkt
	p.hold.Data = p.holdBuf
	return false
}

// jumps reports whether time b is more than p.jump after time a.
func (p *producer) jumps(a, b int64) bool {
	return b > a && uint64(b)-uint64(a) > p.jump
}

// release handles the held packet, if any: nothing came to contradict it.
func (p *producer) release() {
	if p.held {
		p.held = false
		p.packet(&p.hold)
	}
}
