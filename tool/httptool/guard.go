package httptool

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"

	"github.com/agentry/agentry/policy"
)

// blocked are the ranges a model must not reach besides those netip
// classifies (loopback, private, link-local, multicast, unspecified).
var blocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),     // "this network"
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT, often a provider's internal network
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),   // reserved, and the broadcast address
	netip.MustParsePrefix("fc00::/7"),      // unique local (also IsPrivate)
	netip.MustParsePrefix("fec0::/10"),     // site-local (deprecated, still routed inside some networks)
	// NAT64's local-use prefix (RFC 8215) is a network's own translator:
	// every address in it is internal, whatever IPv4 address it carries.
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// embedding are the IPv6 forms that carry an IPv4 address, with where it
// sits: a private IPv4 reached through them is refused as itself.
var embedding = []struct {
	prefix netip.Prefix
	at     int // byte offset of the IPv4 address
}{
	{netip.MustParsePrefix("64:ff9b::/96"), 12}, // NAT64, well-known prefix
	{netip.MustParsePrefix("2002::/16"), 2},     // 6to4
	{netip.MustParsePrefix("::/96"), 12},        // IPv4-compatible (deprecated)
}

// refused says why addr must not be reached, or "" when it may.
func refused(addr netip.Addr) string {
	addr = addr.Unmap()
	switch {
	case !addr.IsValid():
		return "not an address"
	case addr.IsLoopback(), addr.IsPrivate(), addr.IsLinkLocalUnicast(), addr.IsLinkLocalMulticast(),
		addr.IsUnspecified(), addr.IsMulticast(), addr.IsInterfaceLocalMulticast():
		return "a private, loopback or local address"
	}
	for _, p := range blocked {
		if p.Contains(addr) {
			return "a private, loopback or local address (" + p.String() + ")"
		}
	}
	if addr.Is6() {
		b := addr.As16()
		for _, e := range embedding {
			if !e.prefix.Contains(addr) {
				continue
			}
			v4 := netip.AddrFrom4([4]byte(b[e.at : e.at+4]))
			if why := refused(v4); why != "" {
				return "an IPv6 form (" + e.prefix.String() + ") of " + v4.String() + ", " + why
			}
		}
	}
	return ""
}

// guard refuses connections to addresses a model must not reach. It is
// the dialer's Control: it sees the address actually dialled.
func guard(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrBlockedAddress, address)
	}
	if why := refused(addr); why != "" {
		return fmt.Errorf("%w: %s is %s", ErrBlockedAddress, host, why)
	}
	return nil
}

// privateAllowed reports whether the agent's policy lets its HTTP tools
// reach private addresses (policy.network.allow_private).
func privateAllowed(ctx context.Context) bool {
	n := policy.NetworkFrom(ctx)
	return n != nil && n.AllowPrivate
}

// guardedTransport checks the addresses a request's host resolves to
// before a transport of the caller's sends it. A name that resolves to
// another address between the check and the dial slips past it; the
// default transport checks the dialled address itself.
type guardedTransport struct{ next http.RoundTripper }

func (g guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if privateAllowed(req.Context()) {
		return g.next.RoundTrip(req)
	}
	if err := checkHost(req.Context(), req.URL.Hostname()); err != nil {
		return nil, err
	}
	return g.next.RoundTrip(req)
}

func checkHost(ctx context.Context, host string) error {
	if addr, err := netip.ParseAddr(host); err == nil {
		if why := refused(addr); why != "" {
			return fmt.Errorf("%w: %s is %s", ErrBlockedAddress, host, why)
		}
		return nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if why := refused(a); why != "" {
			return fmt.Errorf("%w: %s resolves to %s, %s", ErrBlockedAddress, host, a, why)
		}
	}
	return nil
}
