package httptool

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/tool"
)

func TestGuardRanges(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		blocked bool
	}{
		{"127.0.0.1:80", true},
		{"10.1.2.3:80", true},
		{"172.16.0.1:80", true},
		{"192.168.1.1:80", true},
		{"169.254.169.254:80", true}, // cloud metadata
		{"0.0.0.0:80", true},
		{"0.1.2.3:80", true},    // 0.0.0.0/8
		{"100.64.0.1:80", true}, // carrier-grade NAT
		{"100.127.255.254:80", true},
		{"198.18.0.1:80", true}, // benchmarking
		{"198.19.255.1:80", true},
		{"224.0.0.1:80", true}, // multicast
		{"[::1]:80", true},
		{"[::]:80", true},
		{"[fe80::1]:80", true},
		{"[fd00::1]:80", true},               // unique local
		{"[::ffff:10.0.0.1]:80", true},       // IPv4-mapped
		{"[64:ff9b::a00:1]:80", true},        // NAT64 of 10.0.0.1
		{"[64:ff9b::7f00:1]:80", true},       // NAT64 of 127.0.0.1
		{"[64:ff9b:1::a9fe:a9fe]:80", true},  // local-use NAT64 of 169.254.169.254
		{"[2002:a00:1::1]:80", true},         // 6to4 of 10.0.0.1
		{"[2002:c0a8:101::]:80", true},       // 6to4 of 192.168.1.1
		{"[::a00:1]:80", true},               // IPv4-compatible 10.0.0.1
		{"[64:ff9b:1::5db8:d822]:443", true}, // local-use NAT64: internal whatever it carries
		{"[64:ff9b:1:ffff::1]:443", true},
		{"[fec0::1]:80", true}, // site-local
		{"[feff:ffff::1]:80", true},
		{"240.0.0.1:80", true}, // reserved
		{"255.255.255.255:80", true},
		{"[::ffff:240.1.2.3]:80", true},
		{"[64:ff9b::f001:203]:80", true}, // NAT64 of 240.1.2.3
		{"239.255.255.255:80", true},     // multicast, just below
		{"[ff00::1]:80", true},           // multicast, just above fec0::/10
		{"93.184.216.34:443", false},
		{"100.63.255.255:443", false},
		{"198.20.0.1:443", false},
		{"[2606:4700::1111]:443", false},
		{"[64:ff9b::5db8:d822]:443", false}, // NAT64 of a public address
		{"[2002:5db8:d822::1]:443", false},  // 6to4 of a public address
		{"[64:ff9b:2::1]:443", false},       // just past the local-use NAT64 prefix
		{"[fe7f::1]:443", false},            // just below link-local (fe80::/10)
		{"223.255.255.254:443", false},      // public, just below multicast and 240.0.0.0/4
	} {
		t.Run(tc.addr, func(t *testing.T) {
			err := guard("tcp", tc.addr, nil)
			if tc.blocked != errors.Is(err, ErrBlockedAddress) {
				t.Errorf("guard(%s) = %v, want blocked %v", tc.addr, err, tc.blocked)
			}
		})
	}
}

// A transport of the caller's no longer switches the guard off.
func TestGuardWithACustomTransport(t *testing.T) {
	srv := server()
	defer srv.Close()
	tl := New(Options{Transport: http.DefaultTransport})
	_, err := call(t, tl, `{"url": "`+srv.URL+`/json"}`)
	var d *tool.ErrorDetails
	if !errors.As(err, &d) || d.Type != "blocked" || !strings.Contains(d.Message, "127.0.0.1") {
		t.Fatalf("err = %v, want the loopback address blocked", err)
	}
	if _, err := call(t, New(Options{Transport: http.DefaultTransport}), `{"url": "http://localhost:1/"}`); !strings.Contains(errString(err), "resolves to") {
		t.Errorf("a name resolving to loopback: %v", err)
	}
	if r, err := call(t, New(Options{Transport: http.DefaultTransport, AllowPrivate: true}), `{"url": "`+srv.URL+`/json"}`); err != nil || r.Status != 200 {
		t.Errorf("AllowPrivate with a custom transport: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The agent's network rules, carried by the call's context: hosts outside
// allow_hosts are refused, and allow_private opens private addresses to
// this agent's calls alone.
func TestNetworkPolicy(t *testing.T) {
	srv := server()
	defer srv.Close()
	tl := New(Options{})
	get := func(n *policy.Network, url string) error {
		ctx := context.Background()
		if n != nil {
			ctx = policy.WithNetwork(ctx, n)
		}
		_, err := tl.Call(ctx, json.RawMessage(`{"url": "`+url+`"}`))
		return err
	}
	if err := get(&policy.Network{AllowPrivate: true}, srv.URL+"/json"); err != nil {
		t.Errorf("allow_private: %v", err)
	}
	if err := get(nil, srv.URL+"/json"); err == nil || !strings.Contains(err.Error(), "private, loopback") {
		t.Errorf("without the policy, after a call that allowed private addresses: %v", err)
	}
	err := get(&policy.Network{AllowHosts: []string{"api.example.com", "*.example.org"}, AllowPrivate: true}, srv.URL+"/json")
	var d *tool.ErrorDetails
	if !errors.As(err, &d) || d.Type != "policy_violation" || !strings.Contains(d.Message, "127.0.0.1") {
		t.Errorf("a host outside allow_hosts: %v", err)
	}
	if err := get(&policy.Network{AllowHosts: []string{"127.0.0.*"}, AllowPrivate: true}, srv.URL+"/json"); err != nil {
		t.Errorf("a host inside allow_hosts: %v", err)
	}
}
