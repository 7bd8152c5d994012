package main

// The guest's console commands, so that a test can make a guest probe its peers and read the
// result in the serial log the agent keeps:
//
//	ping <ipv4> [count] [interval]
//	                       count (3; at most 1000) ICMP echo requests interval ms apart (200; 10
//	                       to 10000), whatever the replies do, then up to 1 s more for the last:
//	                       sim.ping <ipv4>: <received>/<sent> replies, longest gap <ms> ms
//	                       The longest gap is the longest the guest went without a reply while it
//	                       was sending (from the first request to the last): a blackout, to within
//	                       the interval.
//	connect <ipv4> <port>  a TCP connection (2 s to connect), a line sent and read back (2 s):
//	                       sim.connect <ipv4>:<port>: echo ok | refused | timed out | <error>
//
// A line that begins with a command's name but does not parse prints `sim: unknown command:
// <line>`. Every other line is what it always was at the login prompt (guest.typed): a login
// name, answered at once with a new prompt. A command prints its line, then the prompt.
//
// Commands run one at a time in the order typed, on a goroutine started for them and gone once
// none is left, so a probe never holds the VMM thread; what they print goes through the serial
// port on the VMM thread, and only while their guest is still the VM's (a command running when
// the guest stops or migrates away is lost with it). A request the guest cannot send (no
// address, no route) is not counted as sent.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/waiter"
)

const (
	pingInterval    = 200 // ms
	pingWait        = time.Second
	pingMaxCount    = 1000
	pingPayloadLen  = 56 // as ping(8) sends
	connectTimeout  = 2 * time.Second
	echoWait        = 2 * time.Second
	connectProbe    = "vmplane sim.connect probe\n"
	unreachableText = "network is unreachable"
)

// isShellCommand says whether a typed line is for the shell rather than the login prompt.
func isShellCommand(line string) bool {
	fields := strings.Fields(line)
	return len(fields) > 0 && (fields[0] == "ping" || fields[0] == "connect")
}

type shell struct {
	guest   *guest
	mu      sync.Mutex
	pending []string
	running bool // a goroutine is draining pending
}

func (s *shell) submit(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = append(s.pending, line)
	if !s.running {
		s.running = true
		go s.drain()
	}
}

func (s *shell) drain() {
	g := s.guest
	for {
		s.mu.Lock()
		if len(s.pending) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		line := s.pending[0]
		s.pending = s.pending[1:]
		s.mu.Unlock()
		output := g.network.run(line)
		g.locked(func() { g.vmm.writeSerial(fmt.Sprintf("%s\n%s login: ", output, g.hostname)) })()
	}
}

// run parses and runs one command and returns the line it prints.
func (n *guestNetwork) run(line string) string {
	fields := strings.Fields(line)
	switch {
	case fields[0] == "ping" && len(fields) >= 2 && len(fields) <= 4:
		to, ok := parseIPv4(fields[1])
		count, interval := 3, pingInterval
		if len(fields) >= 3 {
			count, ok = parseNumber(fields[2], 1, pingMaxCount, ok)
		}
		if len(fields) == 4 {
			interval, ok = parseNumber(fields[3], 10, 10_000, ok)
		}
		if ok {
			result := n.ping(to, count, time.Duration(interval)*time.Millisecond)
			return fmt.Sprintf("sim.ping %s: %d/%d replies, longest gap %d ms", to, result.received, result.sent, result.longestGap.Milliseconds())
		}
	case fields[0] == "connect" && len(fields) == 3:
		to, ok := parseIPv4(fields[1])
		port, ok := parseNumber(fields[2], 1, 65535, ok)
		if ok {
			return fmt.Sprintf("sim.connect %s: %s", netip.AddrPortFrom(to, uint16(port)), n.connect(to, port))
		}
	}
	return "sim: unknown command: " + line
}

func parseIPv4(text string) (netip.Addr, bool) {
	addr, err := netip.ParseAddr(text)
	return addr, err == nil && addr.Is4()
}

// parseNumber reads a number within [low, high]; ok carries the verdict on earlier arguments.
func parseNumber(text string, low, high int, ok bool) (int, bool) {
	n, err := strconv.Atoi(text)
	return n, ok && err == nil && n >= low && n <= high
}

// pingResult is what a ping printed: how many requests went and came back, and the longest the
// guest heard no reply while it was sending.
type pingResult struct {
	sent, received int
	longestGap     time.Duration
}

// ping sends the echo requests through an ICMP endpoint (a ping socket: the stack sets its
// identifier and hands it only the replies to it) one interval apart, whatever the replies do,
// and notes when each reply comes.
func (n *guestNetwork) ping(to netip.Addr, count int, interval time.Duration) pingResult {
	var result pingResult
	if n == nil || n.stack == nil {
		return result
	}
	var queue waiter.Queue
	ep, err := n.stack.NewEndpoint(icmp.ProtocolNumber4, ipv4.ProtocolNumber, &queue)
	if err != nil {
		return result
	}
	defer ep.Close()
	entry, readable := waiter.NewChannelEntry(waiter.ReadableEvents)
	queue.EventRegister(&entry)
	defer queue.EventUnregister(&entry)
	destination := tcpip.FullAddress{Addr: tcpip.AddrFrom4(to.As4())}
	replied := map[uint16]bool{}
	var heard []time.Time
	start := time.Now()
	next, lastSend := start, start
	for seq := 1; n.ctx.Err() == nil; {
		if seq <= count && !time.Now().Before(next) {
			if n.sendEcho(ep, &destination, uint16(seq)) {
				result.sent++
			}
			lastSend, next = time.Now(), next.Add(interval)
			seq++
		}
		heard = n.readReplies(ep, replied, heard)
		wait := time.Until(next)
		if seq > count {
			if len(replied) == result.sent || time.Since(lastSend) >= pingWait {
				break
			}
			wait = time.Until(lastSend.Add(pingWait))
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-readable:
		case <-n.ctx.Done():
		}
		timer.Stop()
	}
	result.received = len(replied)
	result.longestGap = longestGap(start, lastSend, heard)
	return result
}

// sendEcho sends echo request seq; false when the stack could not send it (no address, no route).
func (n *guestNetwork) sendEcho(ep tcpip.Endpoint, to *tcpip.FullAddress, seq uint16) bool {
	request := header.ICMPv4(make([]byte, header.ICMPv4MinimumSize+pingPayloadLen))
	request.SetType(header.ICMPv4Echo)
	request.SetSequence(seq)
	_, err := ep.Write(bytes.NewReader(request), tcpip.WriteOptions{To: to})
	return err == nil
}

// readReplies takes every reply waiting on the endpoint, noting when each new one came.
func (n *guestNetwork) readReplies(ep tcpip.Endpoint, replied map[uint16]bool, heard []time.Time) []time.Time {
	for {
		var reply bytes.Buffer
		if _, err := ep.Read(&reply, tcpip.ReadOptions{}); err != nil {
			return heard
		}
		echo := header.ICMPv4(reply.Bytes())
		if len(echo) >= header.ICMPv4MinimumSize && echo.Type() == header.ICMPv4EchoReply && !replied[echo.Sequence()] {
			replied[echo.Sequence()] = true
			heard = append(heard, time.Now())
		}
	}
}

// longestGap is the longest stretch from start to end with no reply heard in it.
func longestGap(start, end time.Time, heard []time.Time) time.Duration {
	longest, from := time.Duration(0), start
	for _, at := range heard {
		if at.After(end) {
			at = end
		}
		if gap := at.Sub(from); gap > longest {
			longest = gap
		}
		if at.After(from) {
			from = at
		}
	}
	if gap := end.Sub(from); gap > longest {
		longest = gap
	}
	return longest
}

// connect opens a TCP connection, sends a line and reads it back: "echo ok", or what failed.
func (n *guestNetwork) connect(to netip.Addr, port int) string {
	if n == nil || n.stack == nil {
		return unreachableText
	}
	ctx, cancel := context.WithTimeout(n.ctx, connectTimeout)
	defer cancel()
	conn, err := gonet.DialContextTCP(ctx, n.stack, tcpip.FullAddress{Addr: tcpip.AddrFrom4(to.As4()), Port: uint16(port)}, ipv4.ProtocolNumber)
	if err != nil {
		return probeFailure(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(echoWait))
	if _, err := io.WriteString(conn, connectProbe); err != nil {
		return probeFailure(err)
	}
	echoed := make([]byte, len(connectProbe))
	if _, err := io.ReadFull(conn, echoed); err != nil {
		return probeFailure(err)
	}
	if string(echoed) != connectProbe {
		return fmt.Sprintf("echoed %q", echoed)
	}
	return "echo ok"
}

// probeFailure names a failed connection the way the console reports it.
func probeFailure(err error) string {
	var timeout interface{ Timeout() bool }
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &timeout) && timeout.Timeout():
		return "timed out"
	case strings.HasSuffix(err.Error(), (&tcpip.ErrConnectionRefused{}).String()):
		return "refused"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "closed before the echo"
	}
	var opError *net.OpError
	if errors.As(err, &opError) {
		return opError.Err.Error()
	}
	return err.Error()
}
