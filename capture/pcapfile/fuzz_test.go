package pcapfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// fuzzMaxAlloc bounds what reading one fuzz input may allocate: the
// read buffers and the gzip state (about 1.2 MiB), the spill buffer for
// oversized packet blocks and, at worst, ngMaxIfaces interfaces. An
// allocation sized by a length field read from the input would exceed it.
const fuzzMaxAlloc = 8 << 20

// fuzzSmallFrames returns a few short packets, so that the fuzzer's
// mutations land on headers as often as on payload.
func fuzzSmallFrames() []testPkt {
	pkts := testFrames(6, 99, false)
	for i := range pkts {
		pkts[i].data = pkts[i].data[:min(len(pkts[i].data), 23)]
		pkts[i].wireLen = max(pkts[i].wireLen, len(pkts[i].data))
	}
	return pkts
}

// FuzzReader reads arbitrary bytes as a capture file, followed by a
// good file. Whatever the first file holds, the source must not panic nor
// allocate according to its length fields, must end it with an error that
// wraps capture.ErrCorrupt (or not at all), must then read the good file in
// full and return io.EOF. Where gopacket's pcapgo readers decode the same records,
// the packets must agree with theirs. NextBatch must hand out the same
// frames and errors as Next.
func FuzzReader(f *testing.F) {
	pkts := fuzzSmallFrames()
	good := writePcap(f, pkts, flow.LinkEthernet, false)
	goodPath := filepath.Join(f.TempDir(), "good.pcap")
	if err := os.WriteFile(goodPath, good, 0o644); err != nil {
		f.Fatal(err)
	}

	// Classic pcap: microsecond little-endian, nanosecond big-endian, an
	// unsupported link type, and a header alone.
	f.Add(good)
	f.Add(writePcapBE(pkts, flow.LinkRaw, true))
	f.Add(writePcap(f, withLink(pkts, 147), 147, true))
	f.Add(writePcap(f, nil, flow.LinkLinuxSLL, false))
	// pcap cut inside a record, and with a captured length of 4 GiB.
	f.Add(good[:len(good)-5])
	huge := bytes.Clone(good)
	binary.LittleEndian.PutUint32(huge[24+8:], 0xffffff00)
	f.Add(huge)
	// pcapng from pcapgo: three interfaces of different link types.
	multi := append([]testPkt(nil), pkts...)
	for i := range multi {
		multi[i].iface = i % 3
	}
	f.Add(writeNg(f, multi, flow.LinkEthernet, flow.LinkRaw, flow.LinkLinuxSLL2))
	// pcapng by hand: a big-endian section with decimal and binary
	// timestamp resolutions, an offset, simple and obsolete packet blocks
	// and a skipped block, then a little-endian section.
	w := &ngWriter{order: binary.BigEndian}
	w.shb()
	w.idb(flow.LinkEthernet, 0, w.opt(optTsResol, []byte{3}))
	w.idb(flow.LinkRaw, 16, w.opt(optTsResol, []byte{0x80 | 10}), w.opt(optTsOffset, make([]byte, 8)))
	w.epb(0, 1234, []byte{1, 2, 3}, 60)
	w.block(0x0bad, []byte("skip"), 0)
	w.spb([]byte{4, 5, 6, 7, 8}, 5)
	w.pb(1, 99, []byte{9}, 1)
	w.order = binary.LittleEndian
	w.shb()
	w.idb(flow.LinkIPv6, 0)
	w.epb(0, 5, []byte{0x60, 0, 0, 0}, 40)
	f.Add(w.b)
	// gzip around pcap and pcapng, and a gzip stream cut short.
	gz := gzipBytes(f, good)
	f.Add(gz)
	f.Add(gzipBytes(f, w.b))
	f.Add(gz[:len(gz)-3])
	// Truncated captures, read as damage rather than as files of another
	// kind: nothing at all, one byte of a magic number, a pcap file header
	// and a pcapng section header block cut short, a pcap cut inside a
	// record header, a pcapng cut inside a block header and inside a packet
	// block, a gzip cut inside its header and halfway through its stream,
	// and a whole gzip stream of nothing.
	f.Add([]byte{})
	f.Add([]byte{0xd4})
	f.Add(good[:20])
	ngGood := writeNg(f, pkts, flow.LinkEthernet)
	f.Add(ngGood[:20])
	f.Add(good[:24+7])
	ngEnds, _ := ngBlockEnds(ngGood)
	f.Add(ngGood[:ngEnds[2]+5])
	f.Add(ngGood[:ngEnds[2]+30])
	f.Add(gz[:5])
	f.Add(gz[:len(gz)/2])
	f.Add(gzipBytes(f, nil))
	// Not captures: text, two bytes no magic begins with, a gzip of text.
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Add([]byte{0x1f, 0x8c})
	f.Add(gzipBytes(f, []byte("hello")))

	f.Fuzz(func(t *testing.T, data []byte) {
		var (
			got     []testPkt
			all     []testPkt // both files, without wire lengths
			errs    []error
			goodN   int
			openErr error
		)
		alloc := allocated(func() {
			s, err := open(bytes.NewReader(data), "-", goodPath)
			if err != nil {
				openErr = err
				return
			}
			defer s.Close()
			var p capture.Packet
			for {
				err := s.Next(&p)
				if err == io.EOF {
					return
				}
				if err == nil {
					all = append(all, testPkt{data: bytes.Clone(p.Data), timeNs: p.TimeNs, link: p.LinkType})
				}
				if err != nil {
					if s.Current() != "-" || len(errs) > 0 {
						t.Fatalf("error %v from %q after %v", err, s.Current(), errs)
					}
					errs = append(errs, err)
					continue
				}
				if len(p.Data) > MaxCaptureLength || cap(p.Data) != len(p.Data) || p.WireLen < len(p.Data) {
					t.Fatalf("packet of %d bytes (cap %d), wire length %d", len(p.Data), cap(p.Data), p.WireLen)
				}
				if s.Current() == "-" {
					if goodN > 0 {
						t.Fatal("back to the fuzzed file after the good one")
					}
					got = append(got, testPkt{data: bytes.Clone(p.Data), timeNs: p.TimeNs, wireLen: p.WireLen, link: p.LinkType})
					continue
				}
				if goodN >= len(pkts) || !bytes.Equal(p.Data, pkts[goodN].data) {
					t.Fatalf("good file: packet %d differs", goodN)
				}
				goodN++
			}
		})
		if alloc > fuzzMaxAlloc {
			t.Fatalf("%d-byte input: %d bytes allocated", len(data), alloc)
		}
		if openErr != nil {
			if !errors.Is(openErr, ErrNotCapture) {
				t.Fatalf("open: %v", openErr)
			}
			return
		}
		if goodN != len(pkts) {
			t.Fatalf("good file: %d packets of %d", goodN, len(pkts))
		}
		for _, err := range errs {
			var fe *Error
			if !errors.Is(err, capture.ErrCorrupt) || !errors.As(err, &fe) || fe.Path != "-" || fe.Record > int64(len(got))+1 {
				t.Fatalf("error %v after %d packets", err, len(got))
			}
			// The damage is where the input is: within it (plain), and
			// a header error comes before any packet.
			if !fe.Compressed && fe.Offset > int64(len(data)) || fe.Record == 0 && len(got) > 0 || fe.Offset < 0 {
				t.Fatalf("error %v after %d packets of a %d-byte input", err, len(got), len(data))
			}
		}
		fuzzCompare(t, data, got)

		s, err := open(bytes.NewReader(data), "-", goodPath)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		batched, batchErrs := readBatches(t, s, 1)
		compare(t, batched, all, false)
		if len(batchErrs) != len(errs) || len(errs) > 0 && batchErrs[0].Error() != errs[0].Error() {
			t.Fatalf("NextBatch: errors %v, Next: %v", batchErrs, errs)
		}
	})
}

// fuzzCompare checks got against what pcapgo reads from data, for the
// records both read. pcapgo accepts things this package rejects (no
// trailer check, lengths it takes on trust) and rejects some it accepts
// (minor versions, a captured length above the wire length), so only
// the common prefix is compared, and pcapng timestamps are not: pcapgo
// scales binary resolutions inexactly.
func fuzzCompare(t *testing.T, data []byte, got []testPkt) {
	ref, ng := fuzzReference(data, len(got))
	for i := range min(len(ref), len(got)) {
		g, r := got[i], ref[i]
		if !bytes.Equal(g.data, r.data) || g.wireLen != max(r.wireLen, len(r.data)) {
			t.Fatalf("packet %d: %d bytes, wire %d; pcapgo: %d bytes, wire %d", i, len(g.data), g.wireLen, len(r.data), r.wireLen)
		}
		if ng && g.link != r.link || !ng && uint16(g.link) != uint16(r.link) {
			t.Fatalf("packet %d: link type %v; pcapgo: %v", i, g.link, r.link)
		}
		// pcapgo multiplies a microsecond field into 32 bits.
		if !ng && (g.timeNs-r.timeNs)%(1<<32) != 0 {
			t.Fatalf("packet %d: time %d; pcapgo: %d", i, g.timeNs, r.timeNs)
		}
	}
}

// fuzzReference reads up to n packets from data with pcapgo, stopping
// at its first error (or panic: pcapgo's robustness is not under test).
func fuzzReference(data []byte, n int) (pkts []testPkt, ng bool) {
	defer func() {
		if recover() != nil {
			pkts = nil
		}
	}()
	var next func() (testPkt, error)
	if r, err := pcapgo.NewReader(bytes.NewReader(data)); err == nil {
		link := flow.LinkType(r.LinkType())
		next = func() (testPkt, error) {
			d, ci, err := r.ZeroCopyReadPacketData()
			return testPkt{data: d, timeNs: ci.Timestamp.UnixNano(), wireLen: ci.Length, link: link}, err
		}
	} else if r, err := pcapgo.NewNgReader(bytes.NewReader(data), pcapgo.NgReaderOptions{WantMixedLinkType: true}); err == nil {
		ng = true
		next = func() (testPkt, error) {
			d, ci, err := r.ZeroCopyReadPacketData()
			p := testPkt{data: d, wireLen: ci.Length}
			if len(ci.AncillaryData) > 0 {
				p.link = flow.LinkType(ci.AncillaryData[0].(layers.LinkType))
			}
			return p, err
		}
	} else {
		return nil, false
	}
	for len(pkts) < n {
		p, err := next()
		if err != nil {
			break
		}
		p.data = bytes.Clone(p.data)
		pkts = append(pkts, p)
	}
	return pkts, ng
}
