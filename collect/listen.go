package collect

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Protocol is what a listener takes.
type Protocol uint8

// Protocols.
const (
	// NetFlow: UDP datagrams of NetFlow v5, NetFlow v9 or IPFIX, told
	// apart by their version (netflow://, as goflow2 names it; ipfix://
	// too, the scheme flowdedup's own --export sends IPFIX over UDP to).
	NetFlow Protocol = iota + 1
	// IPFIXTCP: IPFIX messages over TCP (ipfix+tcp://).
	IPFIXTCP
	// SFlow: sFlow v5 datagrams over UDP (sflow://).
	SFlow
)

var protocolNames = [...]string{NetFlow: "netflow", IPFIXTCP: "ipfix+tcp", SFlow: "sflow"}

// String returns the protocol's scheme.
func (p Protocol) String() string {
	if p >= NetFlow && p <= SFlow {
		return protocolNames[p]
	}
	return "Protocol(" + strconv.Itoa(int(p)) + ")"
}

// Listener is a parsed --listen URL.
type Listener struct {
	Protocol Protocol
	// Addr is the host and port to bind, e.g. 0.0.0.0:2055 or [::]:6343.
	Addr string
}

// String returns the URL form of l.
func (l Listener) String() string { return l.Protocol.String() + "://" + l.Addr }

// ErrListen is wrapped by every error of ParseListener.
var ErrListen = errors.New("collect: bad listen URL")

// ParseListener parses a listen URL: netflow://HOST:PORT (or ipfix://),
// ipfix+tcp://HOST:PORT or sflow://HOST:PORT. HOST may be an address, a
// name, or empty for every address ("netflow://:2055"); PORT is required,
// and 0 takes a free port (Collector.Addrs says which).
func ParseListener(s string) (Listener, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Listener{}, fmt.Errorf("%w %q: %v", ErrListen, s, err)
	}
	var l Listener
	switch strings.ToLower(u.Scheme) {
	case "netflow", "ipfix", "ipfix+udp":
		l.Protocol = NetFlow
	case "ipfix+tcp":
		l.Protocol = IPFIXTCP
	case "sflow":
		l.Protocol = SFlow
	default:
		return Listener{}, fmt.Errorf("%w %q: want netflow://HOST:PORT (NetFlow v5, v9 and IPFIX over UDP), ipfix+tcp://HOST:PORT or sflow://HOST:PORT", ErrListen, s)
	}
	if u.Path != "" || u.RawQuery != "" || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return Listener{}, fmt.Errorf("%w %q: only a scheme, host and port, e.g. %s://0.0.0.0:2055", ErrListen, s, u.Scheme)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return Listener{}, fmt.Errorf("%w %q: %v (e.g. %s://0.0.0.0:%d)", ErrListen, s, err, u.Scheme, defaultPort(l.Protocol))
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return Listener{}, fmt.Errorf("%w %q: port %q is not a number from 0 to 65535 (0: any free port)", ErrListen, s, port)
	}
	l.Addr = net.JoinHostPort(host, port)
	return l, nil
}

// defaultPort is the IANA port of the protocol, for examples.
func defaultPort(p Protocol) int {
	switch p {
	case SFlow:
		return 6343
	case IPFIXTCP:
		return 4739
	}
	return 2055
}

// Name returns the observer name of an exporter's observation domain:
// its address and domain ID (NetFlow v9 source ID, IPFIX observation
// domain ID, v5 engine type << 8 | engine ID, sFlow sub-agent ID) joined by
// '#', e.g. "192.0.2.1#0" or "2001:db8::1#7". The address is the UDP or
// TCP source of NetFlow and IPFIX, and the agent address the datagrams
// carry for sFlow.
func Name(addr netip.Addr, domain uint32) string {
	return addr.Unmap().String() + "#" + strconv.FormatUint(uint64(domain), 10)
}
