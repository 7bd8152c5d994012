package main

// The simulated guest: alarms set when the VM boots and cleared when it goes away, and a
// network stack on its NICs (guest_network.go) with a few console commands (guest_shell.go).
// Each alarm that changes the VM takes the VMM lock and first checks that its guest is still
// the current one, so an alarm that fires during a shutdown or reboot does nothing. Alarms run
// on the guest's clock (guest_clock.go), which stops while the VM is paused and travels with a
// live migration; the network stops with the clock.

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// rngDeviceID is the id of the virtio-rng device every real VM has (vm_config's default rng).
const rngDeviceID = "__rng"

type guest struct {
	vmm      *vmm
	hostname string
	clock
	powerButtonAt time.Duration // guest time of the power-button press; -1 before one
	network       *guestNetwork // nil for a VM without NICs
	line          []byte        // typed at the console since the last end of line
	shell         *shell        // made for the first command typed
}

// maxLineLen bounds a console line; what is typed beyond it is echoed but not kept.
const maxLineLen = 4096

func (v *vmm) startGuest() {
	g := &guest{vmm: v, powerButtonAt: -1}
	v.guest = g
	cmdline := ""
	if v.config.Payload != nil {
		cmdline = v.config.Payload.Cmdline
	}
	v.writeSerial(fmt.Sprintf("[    0.000000] Linux version 6.12.0-vmplane-simulated (cloud-hypervisor simulator)\n"+
		"[    0.000000] Command line: %s\n", cmdline))
	g.bootLog()
	g.setAlarms()
	g.resume()
}

// pause stops the guest: its clock, and its network (nothing is read from or sent on its TAPs).
func (g *guest) pause() {
	g.clock.pause()
	g.network.pause()
}

func (g *guest) resume() {
	g.clock.resume()
	g.network.resume()
}

// setAlarms sets what the directives make the guest do, in guest time from its boot.
func (g *guest) setAlarms() {
	v := g.vmm
	d := v.config.directives
	g.after(delay{ms: 5, set: true}, func() {
		v.events.emit("virtio-device", "activated", map[string]string{"id": rngDeviceID})
	})
	g.after(d.powerOffAfter, g.locked(func() { v.exit("the guest powered off") }))
	if !v.rebootedOnce {
		g.after(d.guestRebootAfter, g.locked(func() {
			v.rebootedOnce = true
			v.log.info("vmm/src/lib.rs", "VM reset requested by the guest")
			v.resetVM()
		}))
	}
	g.after(d.crashAfter, func() { crash(d) })
	g.after(d.hangAPIAfter, func() {
		v.log.warn("simulator/guest.go", "the API stops answering (sim.hang_api_after_ms)")
		v.hangAPI()
	})
	if d.garbageEvents {
		g.after(delay{ms: 0, set: true}, func() {
			v.events.write([]byte("\x00\x01 this is not an event {{{\n\n{\"timestamp\": {\"secs\": 1}, \"trunc\n\n"))
		})
	}
	if g.powerButtonAt >= 0 {
		g.powerOffAfterButton()
	}
}

// bootLog prints what a booting guest would: its disks and NICs, what cloud-init applied from
// the seed, the marker on the disk `sim.mark_disk` names, the interfaces the network brought up
// (brought up here, paused), then a login prompt.
func (g *guest) bootLog() {
	v := g.vmm
	g.hostname = "localhost"
	var disks []openDisk
	var nics []openNic
	if v.devices != nil {
		disks, nics = v.devices.disks, v.devices.nics
	}
	for i, disk := range disks {
		size := int64(0)
		if info, err := disk.file.Stat(); err == nil {
			size = info.Size()
		}
		v.writeSerial(fmt.Sprintf("[    0.400000] virtio_blk virtio%d: [%s] %d bytes, %s%s\n", i, diskDevice(i), size,
			strings.ToLower(disk.config.ImageType), map[bool]string{true: ", read-only", false: ""}[disk.config.Readonly]))
	}
	for i, nic := range v.config.Net {
		v.writeSerial(fmt.Sprintf("[    0.500000] virtio_net virtio%d eth%d: %s, %d queue pair(s), host TAP %s\n",
			len(disks)+i, i, nic.Mac, nic.queuePairs(), nic.Tap))
	}
	if index := v.config.directives.markDisk; index >= 0 {
		v.writeSerial(markDisk(disks, index))
	}
	seed, err := findSeed(disks)
	switch {
	case err != nil:
		v.writeSerial(fmt.Sprintf("[    1.000000] cloud-init: cannot read the NoCloud seed: %v\n", err))
	case seed != nil:
		for _, line := range seed.applied(v.config.Net) {
			v.writeSerial("[    1.000000] " + line + "\n")
		}
		if seed.metaData.LocalHostname != "" {
			g.hostname = seed.metaData.LocalHostname
		}
	}
	network, lines := startNetwork(nics, seed, v.config.directives.echoPort, v.log)
	g.network = network
	for _, line := range lines {
		v.writeSerial("[    1.100000] " + line + "\n")
	}
	v.writeSerial(fmt.Sprintf("\nDebian GNU/Linux 12 %s ttyS0\n\n%s login: ", g.hostname, g.hostname))
}

// markDisk counts the boots the disk has seen in its first sector ("vmplane-marker boots=N"),
// so a test can tell a disk that persisted from a new one.
func markDisk(disks []openDisk, index int) string {
	if index >= len(disks) || disks[index].config.Readonly {
		return fmt.Sprintf("[    0.900000] sim.mark_disk=%d: no writable disk %d\n", index, index)
	}
	file := disks[index].file
	sector := make([]byte, 512)
	_, _ = file.ReadAt(sector, 0)
	boots := 0
	_, _ = fmt.Sscanf(string(sector), markerFormat, &boots)
	boots++
	marker := make([]byte, 512)
	copy(marker, fmt.Sprintf(markerFormat, boots))
	if _, err := file.WriteAt(marker, 0); err != nil {
		return fmt.Sprintf("[    0.900000] %s: cannot write the marker: %v\n", diskDevice(index), err)
	}
	_ = file.Sync()
	return fmt.Sprintf("[    0.900000] %s: "+markerFormat+"\n", diskDevice(index), boots)
}

const markerFormat = "vmplane-marker boots=%d"

// typed is what the console client sent: echoed as a terminal would. A line that is a shell
// command goes to the shell, which prints the prompt after its result; any other line gets a
// new prompt at once.
func (g *guest) typed(data []byte) {
	v := g.vmm
	for _, b := range data {
		switch b {
		case '\r', '\n':
			line := string(g.line)
			g.line = g.line[:0]
			if !isShellCommand(line) {
				v.writeSerial(fmt.Sprintf("\r\n%s login: ", g.hostname))
				continue
			}
			v.writeSerial("\r\n")
			if g.shell == nil {
				g.shell = &shell{guest: g}
			}
			g.shell.submit(line)
		default:
			v.writeSerial(string([]byte{b}))
			if len(g.line) < maxLineLen {
				g.line = append(g.line, b)
			}
		}
	}
}

// after runs fn once the guest has run for the delay since its boot, unless it is stopped first.
func (g *guest) after(d delay, fn func()) {
	if !d.set || d.never {
		return
	}
	g.at(d.duration(), fn)
}

// locked makes fn an action of the VMM thread: it runs under the VMM lock and only while this
// guest is still the VM's guest.
func (g *guest) locked(fn func()) func() {
	return func() {
		g.vmm.mu.Lock()
		defer g.vmm.mu.Unlock()
		if g.vmm.guest == g {
			fn()
		}
	}
}

func (g *guest) pressPowerButton() {
	v := g.vmm
	if v.config.directives.ignorePowerButton {
		v.log.info("simulator/guest.go", "power button pressed; the guest ignores it")
		return
	}
	if g.powerButtonAt >= 0 {
		return
	}
	g.powerButtonAt = g.now()
	v.writeSerial("[   42.000000] ACPI: Power Button [PWRF]: shutting down\n")
	g.powerOffAfterButton()
}

// powerOffAfterButton is the guest's clean power-off, sim.shutdown_ms after the press.
func (g *guest) powerOffAfterButton() {
	v := g.vmm
	g.at(g.powerButtonAt+v.config.directives.shutdownDelay.duration(), g.locked(func() {
		v.writeSerial("[   42.100000] reboot: Power down\n")
		v.exit("the guest powered off after the power button")
	}))
}

func (v *vmm) stopGuest() {
	if v.guest == nil {
		return
	}
	v.guest.stopAlarms()
	v.guest.network.close()
	v.guest = nil
}

// crash ends the process the way sim.crash_after_ms asks: an exit code, or death by a signal
// with the default action (no handler, no core file), as a crashing VMM would die.
func crash(d directives) {
	if d.crashSignal == 0 {
		os.Exit(d.exitCode)
	}
	_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	debug.SetTraceback("none")
	// The Go runtime handles SEGV, ABRT and friends itself; restore the default action first.
	var action [4]uintptr // sa_handler = SIG_DFL, sa_flags, sa_restorer, sa_mask
	_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(d.crashSignal),
		uintptr(unsafe.Pointer(&action)), 0, 8, 0, 0)
	_ = syscall.Kill(os.Getpid(), d.crashSignal)
	time.Sleep(time.Second)
	os.Exit(128 + int(d.crashSignal))
}
