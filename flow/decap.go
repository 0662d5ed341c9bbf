package flow

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Tunnels is a set of tunnel kinds [Key.DecodeDecap] decapsulates.
type Tunnels uint8

// Tunnel kinds (see the package documentation, Tunnels, for what each
// reads).
const (
	// TunnelGRE: GRE (IP protocol 47) carrying IPv4, IPv6, MPLS or
	// Ethernet (transparent Ethernet bridging, 0x6558).
	TunnelGRE Tunnels = 1 << iota
	// TunnelERSPAN: ERSPAN type I and II (GRE 0x88BE) and III (0x22EB).
	TunnelERSPAN
	// TunnelVXLAN: VXLAN on the UDP ports Decap.VXLANPorts.
	TunnelVXLAN
	// TunnelGeneve: Geneve on the UDP port Decap.GenevePort.
	TunnelGeneve
	// TunnelGTPU: GTP-U T-PDUs on the UDP port Decap.GTPUPort.
	TunnelGTPU
	// TunnelIPIP: IPv4 or IPv6 in IPv4 or IPv6 (protocol 4 and 41).
	TunnelIPIP

	// TunnelsAll is every tunnel kind.
	TunnelsAll = TunnelGRE | TunnelERSPAN | TunnelVXLAN | TunnelGeneve | TunnelGTPU | TunnelIPIP
)

// tunnelNames are the kinds' names in ParseDecap, by bit.
var tunnelNames = [...]string{"gre", "erspan", "vxlan", "geneve", "gtpu", "ipip"}

// Bounds and defaults of decapsulation. The XDP program must unroll its
// loops to the same bounds.
const (
	// MaxDecapLevels bounds the tunnels DecodeDecap goes through: a
	// packet with another listed tunnel inside that many is
	// ErrTunnelTooDeep.
	MaxDecapLevels = 4
	// MaxGTPUExtHeaders bounds a GTP-U header's extension headers; more is
	// ErrTooManyHeaders.
	MaxGTPUExtHeaders = 8

	DefaultVXLANPort      = 4789 // IANA's VXLAN port
	DefaultVXLANPortLinux = 8472 // the Linux kernel's default VXLAN port
	DefaultGenevePort     = 6081
	DefaultGTPUPort       = 2152
)

// Decap says which tunnels Key.DecodeDecap decapsulates, and on which
// ports it recognises the UDP ones. The zero Decap decapsulates nothing:
// DecodeDecap is then Decode. Make one with [ParseDecap] (the CLI's --decap)
// or by hand; a port of 0 matches nothing.
type Decap struct {
	Tunnels    Tunnels
	VXLANPorts [2]uint16 // default 4789 and 8472
	GenevePort uint16    // default 6081
	GTPUPort   uint16    // default 2152
	// NoSegment keys packets inside VXLAN and Geneve by their addresses
	// only: no segment (Key.Segment), so that the same addresses in two
	// VNIs are one key.
	NoSegment bool
}

// ErrBadDecap: the text of a Decap (ParseDecap) is not none, all or a list
// of tunnel kinds and ports.
var ErrBadDecap = errors.New("flow: invalid --decap")

// defaultDecap is the ports ParseDecap starts from.
var defaultDecap = Decap{
	VXLANPorts: [2]uint16{DefaultVXLANPort, DefaultVXLANPortLinux},
	GenevePort: DefaultGenevePort,
	GTPUPort:   DefaultGTPUPort,
}

// ParseDecap returns the Decap s spells: "none" (the zero Decap), or a
// comma-separated list of words:
//
//	gre, erspan, vxlan, geneve, gtpu, ipip   a tunnel kind
//	all                                      every kind
//	vxlan=PORT[+PORT]                        VXLAN, on these UDP ports (default 4789+8472)
//	geneve=PORT                              Geneve, on this port (default 6081)
//	gtpu=PORT                                GTP-U, on this port (default 2152)
//	novni                                    no segments (Decap.NoSegment)
//
// for example "all", "erspan", "vxlan=4789,gre", "all,gtpu=2153,novni".
// Ports are decimal, 1-65535; kinds without a port in the list keep the
// defaults. Anything else is an error wrapping [ErrBadDecap] that names the
// bad word.
func ParseDecap(s string) (Decap, error) {
	if s == "none" {
		return Decap{}, nil
	}
	if s == "" {
		return Decap{}, fmt.Errorf("%w: empty: want none, all or a list of %s", ErrBadDecap, strings.Join(tunnelNames[:], ","))
	}
	d := defaultDecap
	var ported Tunnels
	for w := range strings.SplitSeq(s, ",") {
		name, val, hasVal := strings.Cut(w, "=")
		bad := func(why string) (Decap, error) {
			return Decap{}, fmt.Errorf("%w %q: %q %s", ErrBadDecap, s, w, why)
		}
		switch name {
		case "none":
			return bad("stands alone, not in a list")
		case "all", "novni":
			if hasVal {
				return bad("takes no value")
			}
			if name == "all" {
				d.Tunnels |= TunnelsAll
			} else {
				d.NoSegment = true
			}
			continue
		}
		t := Tunnels(0)
		for i, n := range tunnelNames {
			if n == name {
				t = 1 << i
			}
		}
		if t == 0 {
			return bad("is not a tunnel kind: want none, all, novni, " + strings.Join(tunnelNames[:], ", ") + ", vxlan=PORT[+PORT], geneve=PORT, gtpu=PORT")
		}
		d.Tunnels |= t
		if !hasVal {
			continue
		}
		if t&(TunnelVXLAN|TunnelGeneve|TunnelGTPU) == 0 {
			return bad("takes no port")
		}
		if ported&t != 0 {
			return bad("gives the ports a second time")
		}
		ported |= t
		p1, p2, two := strings.Cut(val, "+")
		if two && t != TunnelVXLAN {
			return bad("takes one port")
		}
		a, ok := parsePort(p1)
		b := uint16(0)
		if two {
			var ok2 bool
			b, ok2 = parsePort(p2)
			ok = ok && ok2
		}
		if !ok {
			return bad("has a bad port: want a number 1-65535")
		}
		switch t {
		case TunnelVXLAN:
			d.VXLANPorts = [2]uint16{a, b}
		case TunnelGeneve:
			d.GenevePort = a
		case TunnelGTPU:
			d.GTPUPort = a
		}
	}
	if d.Tunnels == 0 {
		return Decap{}, fmt.Errorf("%w %q: no tunnel kind in the list", ErrBadDecap, s)
	}
	return d, nil
}

// parsePort reads a decimal port, 1-65535: digits only.
func parsePort(s string) (uint16, bool) {
	if s == "" || len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, false
	}
	return uint16(n), true
}

// String returns the text form of d, which ParseDecap reads back: "none"
// for no tunnels, else "all" or the kinds in the order of ParseDecap's
// list, then the ports that differ from the defaults and "novni":
// "erspan", "all,vxlan=4789,novni", "gre,gtpu=2153".
func (d Decap) String() string {
	if d.Tunnels == 0 {
		return "none"
	}
	var b []byte
	if d.Tunnels&TunnelsAll == TunnelsAll {
		b = append(b, "all"...)
	}
	for i, name := range tunnelNames {
		t := Tunnels(1) << i
		if d.Tunnels&t == 0 {
			continue
		}
		ports := ""
		switch t {
		case TunnelVXLAN:
			if d.VXLANPorts != defaultDecap.VXLANPorts {
				ports = strconv.Itoa(int(d.VXLANPorts[0]))
				if d.VXLANPorts[1] != 0 {
					ports += "+" + strconv.Itoa(int(d.VXLANPorts[1]))
				}
			}
		case TunnelGeneve:
			if d.GenevePort != DefaultGenevePort {
				ports = strconv.Itoa(int(d.GenevePort))
			}
		case TunnelGTPU:
			if d.GTPUPort != DefaultGTPUPort {
				ports = strconv.Itoa(int(d.GTPUPort))
			}
		}
		if d.Tunnels&TunnelsAll == TunnelsAll && ports == "" {
			continue // "all" named it
		}
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = append(b, name...)
		if ports != "" {
			b = append(b, '=')
			b = append(b, ports...)
		}
	}
	if d.NoSegment {
		b = append(b, ",novni"...)
	}
	return string(b)
}

// MarshalText implements [encoding.TextMarshaler] (see String).
func (d Decap) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements [encoding.TextUnmarshaler] with ParseDecap, so
// that a Decap can be bound to a flag with [flag.TextVar].
func (d *Decap) UnmarshalText(text []byte) error {
	p, err := ParseDecap(string(text))
	if err != nil {
		return err
	}
	*d = p
	return nil
}
