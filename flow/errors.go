package flow

import "errors"

// Errors returned by Parse. Parse returns these values themselves, never
// wrapped, so that a failed parse costs no allocation; compare with == or
// [errors.Is].
var (
	// ErrTruncated: the frame ends inside a header the key kind needs.
	ErrTruncated = errors.New("flow: frame truncated inside a needed header")
	// ErrNotIP: the frame is well formed but carries no IPv4 or IPv6
	// packet (ARP, LLDP, PPPoE discovery, an MPLS pseudowire, ...). It is
	// unsupported traffic, not corruption.
	ErrNotIP = errors.New("flow: not an IP packet")
	// ErrBadHeader: a header is invalid (IP version mismatch, IPv4 header
	// length below 5 words, an IP length shorter than its header, ...).
	ErrBadHeader = errors.New("flow: malformed header")
	// ErrUnsupportedLink: Parse does not know the link type.
	ErrUnsupportedLink = errors.New("flow: unsupported link type")
	// ErrTooManyHeaders: the frame stacks more than MaxLinkHeaders VLAN
	// tags, MPLS labels and PPPoE headers, or more than MaxIPv6Headers IPv6
	// extension headers.
	ErrTooManyHeaders = errors.New("flow: too many stacked headers")
	// ErrBadKind: the key kind is not one of KeySrc, KeyDst, KeyPair,
	// Key5Tuple.
	ErrBadKind = errors.New("flow: invalid key kind")

	// Errors of DecodeDecap (see the package documentation, Tunnels).

	// ErrTunnelTruncated: the frame ends inside the header of a tunnel
	// DecodeDecap decapsulates (its UDP header, GRE, ERSPAN, VXLAN,
	// Geneve or GTP-U header, options or extension headers).
	ErrTunnelTruncated = errors.New("flow: frame truncated inside a tunnel header")
	// ErrTunnelBadHeader: a tunnel header is invalid (GRE with the
	// routing bit, VXLAN without the I flag, a Geneve, GTP-U or ERSPAN
	// version DecodeDecap does not read, a GTP-U extension header of
	// length 0).
	ErrTunnelBadHeader = errors.New("flow: malformed tunnel header")
	// ErrTunnelUnknown: a tunnel carries what DecodeDecap does not read (a
	// GRE protocol other than IPv4, IPv6, MPLS, Ethernet and ERSPAN, GRE
	// version 1, a Geneve protocol other than Ethernet, IPv4 and IPv6, a
	// GTP-U T-PDU or ERSPAN III frame that is not IP).
	ErrTunnelUnknown = errors.New("flow: unknown tunnel payload")
	// ErrTunnelNotData: a GTP-U message other than a T-PDU (echo, error
	// indication, end marker, ...): signalling, with no user packet in it.
	ErrTunnelNotData = errors.New("flow: tunnel message carries no packet")
	// ErrTunnelTooDeep: the packet holds another tunnel inside
	// MaxDecapLevels of them.
	ErrTunnelTooDeep = errors.New("flow: tunnels nested too deep")
)

// reasons lists the sentinels with their labels, in the order Reasons
// returns them.
var reasons = [...]struct {
	err   error
	label string
}{
	{ErrTruncated, "truncated"},
	{ErrNotIP, "not_ip"},
	{ErrBadHeader, "bad_header"},
	{ErrUnsupportedLink, "unsupported_link"},
	{ErrTooManyHeaders, "too_many_headers"},
	{ErrBadKind, "bad_kind"},
	{ErrTunnelTruncated, "tunnel_truncated"},
	{ErrTunnelBadHeader, "tunnel_bad_header"},
	{ErrTunnelUnknown, "tunnel_unknown"},
	{ErrTunnelNotData, "tunnel_not_data"},
	{ErrTunnelTooDeep, "tunnel_too_deep"},
}

// Reason returns a short stable label for err, for use as a metrics label:
// "truncated", "not_ip", "bad_header", "unsupported_link",
// "too_many_headers", "bad_kind", "tunnel_truncated", "tunnel_bad_header",
// "tunnel_unknown", "tunnel_not_data" or "tunnel_too_deep" for the package's
// errors (wrapped or not), "ok" for nil and "other" for any other error. It
// does not allocate.
func Reason(err error) string {
	if err == nil {
		return "ok"
	}
	for _, r := range reasons {
		if err == r.err {
			return r.label
		}
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.label
		}
	}
	return "other"
}

// Reasons returns every label Reason can return for a non-nil error, so that
// metrics can be registered up front. The caller owns the returned slice.
func Reasons() []string {
	labels := make([]string, 0, len(reasons)+1)
	for _, r := range reasons {
		labels = append(labels, r.label)
	}
	return append(labels, "other")
}

// IsMalformed reports whether err says the frame is corrupt or cut short
// (ErrTruncated, ErrBadHeader, ErrTooManyHeaders, ErrTunnelTruncated,
// ErrTunnelBadHeader, ErrTunnelTooDeep), as opposed to traffic the parser
// does not key (ErrNotIP, ErrUnsupportedLink, ErrTunnelUnknown,
// ErrTunnelNotData) or a caller mistake (ErrBadKind). Window summaries count
// the former as malformed.
func IsMalformed(err error) bool {
	return errors.Is(err, ErrTruncated) || errors.Is(err, ErrBadHeader) || errors.Is(err, ErrTooManyHeaders) ||
		errors.Is(err, ErrTunnelTruncated) || errors.Is(err, ErrTunnelBadHeader) || errors.Is(err, ErrTunnelTooDeep)
}
