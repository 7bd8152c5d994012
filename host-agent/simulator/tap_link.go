package main

// The link between a NIC's TAP and the simulated guest's network stack: what the VMM's
// virtio-net queue workers and the guest's driver do together, as one gVisor link endpoint.
//
// It is gVisor's channel endpoint (under the ethernet endpoint, which adds and strips the
// Ethernet header and makes the NIC resolve with ARP) fed by readers of our own, not fdbased:
// fdbased skips the virtio-net header only on packet sockets, and on a TAP descriptor would
// take the header for the start of the frame. Every frame read from any queue of the TAP (a
// multi-queue TAP spreads host-to-guest frames over its queues by flow) loses its virtio-net
// header and goes to the stack; every frame the stack sends is written, behind a zeroed header,
// on the first queue as soon as it is queued (channel's write notification: no goroutine waits
// for it).
//
// The header is as long as the TAP says (TUNGETVNETHDRSZ: 10 bytes unless set otherwise). The
// link programs the TAP with no offload when it comes up (TUNSETOFFLOAD 0), as Cloud Hypervisor
// programs what the guest's driver negotiated and this guest negotiates none: the kernel then
// completes checksums and segments before a frame reaches the TAP, so the header of a frame
// read carries nothing to act on, and a zeroed one says the same of a frame written.
//
// Paused, the link neither reads nor sends: its readers end (a read deadline in the past wakes
// them) and what the stack sends is dropped, so host-to-guest frames wait in the kernel's queue
// as they would for a paused VM. The TAP's descriptors stay the devices' (devices.go), which
// close them.

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// linkQueueLen bounds the frames queued between the stack and the TAP; each is written as soon
// as it is queued, so this is only the room for concurrent senders.
const linkQueueLen = 64

// aLongTimeAgo is a read deadline that has passed: it wakes a blocked read at once.
var aLongTimeAgo = time.Unix(1, 0)

type tapLink struct {
	endpoint  *channel.Endpoint
	queues    []*os.File
	headerLen int // the virtio-net header in front of each frame
	log       *logger

	mu      sync.Mutex // held while running changes and while a frame is written
	running bool
	readers sync.WaitGroup
}

// newTapLink activates the NIC's TAP for a guest whose interface has this MTU and MAC, paused.
func newTapLink(nic openNic, mtu uint32, mac tcpip.LinkAddress, log *logger) (*tapLink, error) {
	headerLen, err := vnetHeaderLen(nic.queues[0])
	if err != nil {
		return nil, fmt.Errorf("TUNGETVNETHDRSZ: %s", osErrorText(err))
	}
	if err := control(nic.queues[0], func(fd int) error { return unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, 0) }); err != nil {
		return nil, fmt.Errorf("TUNSETOFFLOAD: %s", osErrorText(err))
	}
	l := &tapLink{
		endpoint:  channel.New(linkQueueLen, mtu+header.EthernetMinimumSize, mac),
		queues:    nic.queues,
		headerLen: headerLen,
		log:       log,
	}
	l.endpoint.AddNotify(l)
	return l, nil
}

// vnetHeaderLen is the size of the virtio-net header the TAP puts in front of each frame.
func vnetHeaderLen(queue *os.File) (int, error) {
	size := 0
	err := control(queue, func(fd int) (err error) {
		size, err = unix.IoctlGetInt(fd, unix.TUNGETVNETHDRSZ)
		return err
	})
	return size, err
}

// control runs an ioctl on the file's descriptor without taking it out of Go's poller.
func control(file *os.File, ioctl func(fd int) error) error {
	conn, err := file.SyscallConn()
	if err != nil {
		return err
	}
	var ioctlErr error
	if err := conn.Control(func(fd uintptr) { ioctlErr = ioctl(int(fd)) }); err != nil {
		return err
	}
	return ioctlErr
}

// resume starts a reader on every queue.
func (l *tapLink) resume() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running {
		return
	}
	l.running = true
	for _, queue := range l.queues {
		_ = queue.SetReadDeadline(time.Time{})
		l.readers.Add(1)
		go l.read(queue)
	}
}

// pause returns once no reader is left: nothing is read from the TAP after it.
func (l *tapLink) pause() {
	l.mu.Lock()
	if !l.running {
		l.mu.Unlock()
		return
	}
	l.running = false
	for _, queue := range l.queues {
		_ = queue.SetReadDeadline(aLongTimeAgo)
	}
	l.mu.Unlock()
	l.readers.Wait()
}

// read hands each frame of one queue to the stack until the link pauses or the TAP closes. A
// frame longer than the MTU is dropped, as a guest driver without mergeable buffers drops it.
func (l *tapLink) read(queue *os.File) {
	defer l.readers.Done()
	buf := make([]byte, l.headerLen+int(l.endpoint.MTU())+1)
	for {
		n, err := queue.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, os.ErrClosed) {
				l.log.warn("simulator/tap_link.go", "reading the TAP failed, the guest receives no more on this queue: %v", err)
			}
			return
		}
		if n <= l.headerLen || n == len(buf) {
			continue
		}
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(buf[l.headerLen:n])})
		l.endpoint.InjectInbound(0, pkt) // the ethernet endpoint reads the protocol from the frame
		pkt.DecRef()
	}
}

// WriteNotify is the channel endpoint saying the stack queued frames: they go out now, or are
// dropped while the link is paused.
func (l *tapLink) WriteNotify() {
	for pkt := l.endpoint.Read(); pkt != nil; pkt = l.endpoint.Read() {
		l.send(pkt)
		pkt.DecRef()
	}
}

func (l *tapLink) send(pkt *stack.PacketBuffer) {
	frame := make([]byte, l.headerLen, l.headerLen+pkt.Size())
	for _, part := range pkt.AsSlices() {
		frame = append(frame, part...)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running {
		_, _ = l.queues[0].Write(frame)
	}
}
