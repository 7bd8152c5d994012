package main

// The simulated guest's network: an IPv4 stack on the VM's NICs, configured as cloud-init
// configures a real guest from the NoCloud seed's network-config (cloudinit.go). Each NIC whose
// MAC an interface of network-config matches gets that interface's addresses, the MTU its `mtu`
// key gives (1500 without one) and its routes (the agent writes a default route via the
// network's gateway); so the guest answers ARP and ping at its addresses, runs the TCP echo
// service of sim.echo_port, and probes its peers from the console (guest_shell.go).
//
// The stack is gVisor's netstack (ipv4, arp, icmp, tcp): a real TCP/IP stack in Go, so the
// simulator stays one static program with CGO off and needs no privilege or namespace of its
// own; each NIC reaches its TAP through a tapLink (tap_link.go). A NIC no interface configures
// still has its link up: what arrives on it is read and dropped, as by a guest with a link and
// no address. A guest with no address at all has no stack.
//
// The network lives as long as the guest: brought up paused when the guest boots (or arrives
// in a migration: the same config and seed give the same addresses), running while the guest
// runs, torn down with it. Connections do not survive a migration: the target's stack is a
// new one.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

const defaultMTU = 1500

type guestNetwork struct {
	links []*tapLink      // one per NIC whose link came up
	stack *stack.Stack    // nil when no NIC has an address
	ctx   context.Context // done when the network goes away, which ends a running probe
	stop  context.CancelFunc
}

// nicAddressing is what a network-config interface gives a NIC.
type nicAddressing struct {
	addresses []tcpip.AddressWithPrefix
	routes    []tcpip.Route // their NIC left to set
}

// startNetwork brings the guest's network up, paused (the guest's resume starts it), and
// returns it (nil for a VM without NICs) with a line per NIC given an address, for the boot
// log.
func startNetwork(nics []openNic, seed *cloudInitSeed, echoPort int, log *logger) (*guestNetwork, []string) {
	if len(nics) == 0 {
		return nil, nil
	}
	n := &guestNetwork{}
	n.ctx, n.stop = context.WithCancel(context.Background())
	var lines []string
	for i, nic := range nics {
		name := fmt.Sprintf("eth%d", i)
		eth, configured := seed.ethernetFor(nic.config.Mac)
		mtu := eth.MTU
		if mtu == 0 {
			mtu = defaultMTU
		}
		mac, macErr := net.ParseMAC(nic.config.Mac)
		link, err := newTapLink(nic, mtu, tcpip.LinkAddress(mac), log)
		if err != nil {
			log.warn("simulator/guest_network.go", "%s: the link does not come up: %v", name, err)
			continue
		}
		n.links = append(n.links, link)
		if !configured || len(eth.Addresses) == 0 {
			continue
		}
		addresses := strings.Join(eth.Addresses, ",")
		addressing, err := eth.addressing()
		if err == nil {
			err = macErr
		}
		if err == nil {
			err = n.addNIC(tcpip.NICID(i+1), name, link, addressing)
		}
		if err != nil {
			lines = append(lines, fmt.Sprintf("%s: cannot bring up %s: %v", name, addresses, err))
			continue
		}
		lines = append(lines, fmt.Sprintf("%s: %s up, mtu %d", name, addresses, mtu))
	}
	if n.stack != nil && echoPort != 0 {
		if err := serveEcho(n.stack, echoPort); err != nil {
			log.warn("simulator/guest_network.go", "the echo service cannot listen on port %d: %v", echoPort, err)
		}
	}
	return n, lines
}

// addressing reads the interface's addresses (IPv4 with a prefix, each with its on-link route)
// and its routes (`to: default` is 0.0.0.0/0).
func (e seedEthernet) addressing() (nicAddressing, error) {
	var a nicAddressing
	for _, text := range e.Addresses {
		prefix, err := netip.ParsePrefix(text)
		if err != nil || !prefix.Addr().Is4() {
			return a, fmt.Errorf("%q is not an IPv4 address with a prefix", text)
		}
		address := tcpip.AddressWithPrefix{Address: tcpip.AddrFrom4(prefix.Addr().As4()), PrefixLen: prefix.Bits()}
		a.addresses = append(a.addresses, address)
		a.routes = append(a.routes, tcpip.Route{Destination: address.Subnet()})
	}
	for _, route := range e.Routes {
		to := route.To
		if to == "default" {
			to = "0.0.0.0/0"
		}
		destination, err := netip.ParsePrefix(to)
		if err != nil || !destination.Addr().Is4() {
			return a, fmt.Errorf("route to %q: not an IPv4 prefix", route.To)
		}
		r := tcpip.Route{Destination: tcpip.AddressWithPrefix{
			Address: tcpip.AddrFrom4(destination.Addr().As4()), PrefixLen: destination.Bits(),
		}.Subnet()}
		if route.Via != "" {
			via, err := netip.ParseAddr(route.Via)
			if err != nil || !via.Is4() {
				return a, fmt.Errorf("route to %s: gateway %q is not an IPv4 address", route.To, route.Via)
			}
			r.Gateway = tcpip.AddrFrom4(via.As4())
		}
		a.routes = append(a.routes, r)
	}
	return a, nil
}

// addNIC puts the link in the stack (made for the first) with its addresses and routes.
func (n *guestNetwork) addNIC(id tcpip.NICID, name string, link *tapLink, a nicAddressing) error {
	if n.stack == nil {
		n.stack = stack.New(stack.Options{
			NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
			TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, icmp.NewProtocol4},
		})
	}
	if err := n.stack.CreateNICWithOptions(id, ethernet.New(link.endpoint), stack.NICOptions{Name: name}); err != nil {
		return errors.New(err.String())
	}
	for _, address := range a.addresses {
		protocolAddress := tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber, AddressWithPrefix: address}
		if err := n.stack.AddProtocolAddress(id, protocolAddress, stack.AddressProperties{}); err != nil {
			return errors.New(err.String())
		}
	}
	for _, route := range a.routes {
		route.NIC = id
		n.stack.AddRoute(route)
	}
	return nil
}

// serveEcho runs the TCP echo service on all the guest's addresses: each connection gets back
// every byte it sends until it closes. Its goroutines end when the stack is destroyed, which
// aborts every endpoint.
func serveEcho(s *stack.Stack, port int) error {
	listener, err := gonet.ListenTCP(s, tcpip.FullAddress{Port: uint16(port)}, ipv4.ProtocolNumber)
	if err != nil {
		return err
	}
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(conn, conn)
				_ = conn.Close()
			}()
		}
	}()
	return nil
}

func (n *guestNetwork) pause() {
	if n == nil {
		return
	}
	for _, link := range n.links {
		link.pause()
	}
}

func (n *guestNetwork) resume() {
	if n == nil {
		return
	}
	for _, link := range n.links {
		link.resume()
	}
}

// close stops the links first, so that the dying stack sends nothing (not even the resets of
// its connections: a VM that is shut down just goes silent), then destroys it.
func (n *guestNetwork) close() {
	if n == nil {
		return
	}
	n.pause()
	n.stop()
	if n.stack != nil {
		n.stack.Destroy()
	}
}
