package main

// The announcement the destination's VMM makes when a migrated VM resumes there, as Cloud
// Hypervisor's virtio-net does since its post-migration announce (cloud-hypervisor PR #8263):
// a RARP broadcast from each NIC's MAC, QEMU's self-announce frame, written on every queue of
// the NIC's TAP, so that learning bridges and VXLAN devices (and the switches behind them) move
// the MAC to this host at once rather than when the guest next sends. The VMM sends it, not the
// guest, which sends nothing unasked.
//
// As in CH: five rounds 200 ms apart, the first as the VM resumes, best effort (a failed write
// is logged); they stop when the VM pauses or goes away. A VM that arrives paused (it was paused
// on the source) is not announced. The frame is CH's, 1514 bytes zero-padded behind a zeroed
// virtio-net header:
//
//	destination ff:ff:ff:ff:ff:ff, source <MAC>, ethertype 0x8035 (RARP)
//	hardware type 1, protocol type 0x0800, address lengths 6 and 4, opcode 3 (reverse request)
//	sender and target hardware address <MAC>, sender and target protocol address 0.0.0.0

import (
	"encoding/binary"
	"net"
	"time"
)

const (
	announceRounds   = 5
	announceInterval = 200 * time.Millisecond
	ethFrameLen      = 1514 // ETH_FRAME_LEN
	ethTypeRARP      = 0x8035
)

// announceNICs sends the first round now and sets the others. The caller holds v.mu and has
// just resumed the VM.
func (v *vmm) announceNICs() {
	g := v.guest
	type announcement struct {
		nic   openNic
		frame []byte
	}
	var announcements []announcement
	for _, nic := range v.devices.nics {
		mac, err := net.ParseMAC(nic.config.Mac)
		if err != nil || len(mac) != 6 {
			continue // without a MAC in the config CH makes one up, which the simulator cannot know
		}
		headerLen, err := vnetHeaderLen(nic.queues[0])
		if err != nil {
			v.log.error("virtio-devices/src/net.rs", "Host RARP for %s: %s", nic.config.Tap, osErrorText(err))
			continue
		}
		announcements = append(announcements, announcement{nic: nic, frame: append(make([]byte, headerLen), rarpFrame(mac)...)})
	}
	var round func(done int)
	round = func(done int) {
		for _, a := range announcements {
			for _, queue := range a.nic.queues {
				if _, err := queue.Write(a.frame); err != nil {
					v.log.error("virtio-devices/src/net.rs", "Host RARP write to TAP failed: %s", osErrorText(err))
				}
			}
		}
		if done+1 < announceRounds {
			time.AfterFunc(announceInterval, g.locked(func() {
				if g.running() {
					round(done + 1)
				}
			}))
		}
	}
	if len(announcements) > 0 {
		round(0)
	}
}

// rarpFrame is the announcement of a MAC, without the virtio-net header.
func rarpFrame(mac net.HardwareAddr) []byte {
	frame := make([]byte, ethFrameLen)
	copy(frame[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(frame[6:12], mac)
	binary.BigEndian.PutUint16(frame[12:14], ethTypeRARP)
	binary.BigEndian.PutUint16(frame[14:16], 1)      // hardware type: Ethernet
	binary.BigEndian.PutUint16(frame[16:18], 0x0800) // protocol type: IPv4
	frame[18], frame[19] = 6, 4                      // address lengths
	binary.BigEndian.PutUint16(frame[20:22], 3)      // opcode: reverse request
	copy(frame[22:28], mac)                          // sender hardware address; protocol address 0.0.0.0
	copy(frame[32:38], mac)                          // target hardware address; protocol address 0.0.0.0
	return frame
}
