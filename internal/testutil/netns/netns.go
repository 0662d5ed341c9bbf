package netns

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
)

// Namespace is a network namespace made for one test. It holds a veth pair
// whose ends are up, carry no addresses and have IPv6 turned off (so the
// kernel sends no neighbour discovery or MLD frames of its own on them): a
// frame sent into one end is received on the other.
type Namespace struct {
	// Name is the namespace's name under /run/netns, as `ip netns` shows
	// it, or "" when it could not be named (it is then anonymous).
	Name string
	// Veth holds the names of the pair's two ends.
	Veth [2]string

	ns vnetns.NsHandle
	nl *netlink.Handle
}

var nsSeq atomic.Uint32

// NetNS makes a network namespace with a veth pair for tb, removed by
// tb.Cleanup after the test's own cleanups. It skips tb, saying why, when the
// process may not do this (see RequireRoot) or the kernel lacks network
// namespaces or veth.
func NetNS(tb testing.TB) *Namespace {
	tb.Helper()
	testutil.RequireRoot(tb)
	n := &Namespace{
		Name: fmt.Sprintf("fdtest-%d-%d", os.Getpid(), nsSeq.Add(1)),
		Veth: [2]string{"fdveth0", "fdveth1"},
	}
	h, named, err := newNetNS(n.Name)
	if err != nil {
		testutil.SkipOrFail(tb, "cannot make a network namespace (kernel without CONFIG_NET_NS, or a sandbox forbids unshare): %v", err)
	}
	if !named {
		n.Name = ""
	}
	n.ns = h
	tb.Cleanup(n.destroy)

	if n.nl, err = netlink.NewHandleAt(h); err != nil {
		tb.Fatalf("netlink handle in namespace: %v", err)
	}
	// Turn IPv6 off before the links exist, so they inherit it from
	// "default" and never send router solicitations or DAD probes.
	if err := n.Do(disableIPv6); err != nil {
		tb.Logf("testutil: IPv6 stays on in the test namespace (%v): expect its frames", err)
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: n.Veth[0]}, PeerName: n.Veth[1]}
	if err := n.nl.LinkAdd(veth); err != nil {
		testutil.SkipOrFail(tb, "cannot make a veth pair (kernel without CONFIG_VETH?): %v", err)
	}
	for _, name := range []string{"lo", n.Veth[0], n.Veth[1]} {
		l, err := n.nl.LinkByName(name)
		if err != nil {
			tb.Fatalf("link %s: %v", name, err)
		}
		if err := n.nl.LinkSetUp(l); err != nil {
			tb.Fatalf("set %s up: %v", name, err)
		}
	}
	// Until the kernel's link watcher sees the carrier, a device's queue
	// discipline drops what is sent: wait for both ends to be up for real.
	for _, name := range n.Veth {
		n.waitOperUp(tb, name, 5*time.Second, false)
	}
	return n
}

// newNetNS makes a network namespace, named if it can be, and returns a
// handle to it without leaving any thread of the process inside it.
func newNetNS(name string) (h vnetns.NsHandle, named bool, err error) {
	type result struct {
		h     vnetns.NsHandle
		named bool
		err   error
	}
	done := make(chan result, 1)
	go func() {
		// Unsharing moves this thread into the new namespace. If it cannot
		// be moved back, it stays locked, and the runtime ends the thread
		// with the goroutine instead of reusing it.
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer orig.Close()
		named := true
		h, err := vnetns.NewNamed(name)
		if err != nil {
			named = false
			h, err = vnetns.New() // no /run/netns to mount on: stay anonymous
		}
		if err != nil {
			vnetns.Set(orig)
			done <- result{err: err}
			return
		}
		if err := vnetns.Set(orig); err != nil {
			h.Close()
			done <- result{err: fmt.Errorf("returning to the original namespace: %w", err)}
			return
		}
		runtime.UnlockOSThread()
		done <- result{h, named, nil}
	}()
	r := <-done
	return r.h, r.named, r.err
}

func disableIPv6() error {
	var errs []error
	for _, conf := range []string{"default", "all"} {
		errs = append(errs, os.WriteFile("/proc/sys/net/ipv6/conf/"+conf+"/disable_ipv6", []byte("1"), 0))
	}
	return errors.Join(errs...)
}

// waitOperUp waits for the link's operational state to be up, or unknown
// too when orUnknown is set (devices such as tun never report more).
func (n *Namespace) waitOperUp(tb testing.TB, name string, limit time.Duration, orUnknown bool) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for {
		l, err := n.nl.LinkByName(name)
		if err != nil {
			tb.Fatalf("link %s: %v", name, err)
		}
		if st := l.Attrs().OperState; st == netlink.OperUp || orUnknown && st == netlink.OperUnknown {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("link %s not up after %v (state %v)", name, limit, l.Attrs().OperState)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Do runs fn on an OS thread that is inside the namespace, and returns its
// error. Sockets fn opens belong to the namespace for their whole life and
// may be used from any goroutine afterwards; goroutines fn starts do not run
// inside the namespace.
func (n *Namespace) Do(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			done <- err
			return
		}
		defer orig.Close()
		if err := vnetns.Set(n.ns); err != nil {
			done <- fmt.Errorf("entering namespace: %w", err)
			return
		}
		err = fn()
		if vnetns.Set(orig) == nil {
			runtime.UnlockOSThread() // else the thread dies with this goroutine
		}
		done <- err
	}()
	return <-done
}

// Netlink returns a netlink handle working inside the namespace, owned by n.
func (n *Namespace) Netlink() *netlink.Handle { return n.nl }

// Link returns the namespace's link called name, failing tb if there is none.
func (n *Namespace) Link(tb testing.TB, name string) netlink.Link {
	tb.Helper()
	l, err := n.nl.LinkByName(name)
	if err != nil {
		tb.Fatalf("link %s: %v", name, err)
	}
	return l
}

// destroy releases the namespace. The kernel frees it, and the veth pair
// with it, once no socket or handle refers to it any more.
func (n *Namespace) destroy() {
	if n.nl != nil {
		n.nl.Close()
	}
	n.ns.Close()
	if n.Name != "" {
		vnetns.DeleteNamed(n.Name)
	}
}

// AddTun makes a tun device called name in the namespace (IFF_TUN without
// packet information), sets it up and returns its queue: what the test
// writes to it, the device receives as raw IP packets. Both go away with
// the test.
func (n *Namespace) AddTun(tb testing.TB, name string) *os.File {
	tb.Helper()
	tun := &netlink.Tuntap{
		LinkAttrs:  netlink.LinkAttrs{Name: name},
		Mode:       netlink.TUNTAP_MODE_TUN,
		Flags:      netlink.TUNTAP_NO_PI,
		Queues:     1, // else the library closes the queue it opened
		NonPersist: true,
	}
	// The device is made through /dev/net/tun, in the caller's namespace.
	if err := n.Do(func() error { return netlink.LinkAdd(tun) }); err != nil {
		testutil.SkipOrFail(tb, "cannot make a tun device (kernel without CONFIG_TUN, or no /dev/net/tun): %v", err)
	}
	queue := tun.Fds[0]
	tb.Cleanup(func() { queue.Close() })
	if err := n.nl.LinkSetUp(n.Link(tb, name)); err != nil {
		tb.Fatalf("set %s up: %v", name, err)
	}
	n.waitOperUp(tb, name, 5*time.Second, true)
	return queue
}
