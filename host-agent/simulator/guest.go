package main

// The simulated guest: timers armed when the VM boots and disarmed when it goes away. Each
// timer that changes the VM takes the VMM lock and first checks that its guest is still the
// current one, so a timer that fires during a shutdown or reboot does nothing.

import (
	"fmt"
	"os"
	"runtime/debug"
	"syscall"
	"time"
	"unsafe"
)

// rngDeviceID is the id of the virtio-rng device every real VM has (vm_config's default rng).
const rngDeviceID = "__rng"

type guest struct {
	vmm                *vmm
	timers             []*time.Timer
	powerButtonPressed bool
}

func (v *vmm) startGuest() {
	g := &guest{vmm: v}
	v.guest = g
	d := v.config.directives
	cmdline := ""
	if v.config.Payload != nil {
		cmdline = v.config.Payload.Cmdline
	}
	v.writeSerial(fmt.Sprintf("[    0.000000] Linux version 6.12.0-vmplane-simulated (cloud-hypervisor simulator)\n"+
		"[    0.000000] Command line: %s\n", cmdline))

	g.after(delay{ms: 5, set: true}, func() {
		v.events.emit("virtio-device", "activated", map[string]string{"id": rngDeviceID})
	})
	g.afterLocked(d.powerOffAfter, func() { v.exit("the guest powered off") })
	if !v.rebootedOnce {
		g.afterLocked(d.guestRebootAfter, func() {
			v.rebootedOnce = true
			v.log.info("vmm/src/lib.rs", "VM reset requested by the guest")
			v.rebootGuest()
		})
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
}

// after runs fn once the delay has passed, unless the guest is stopped first.
func (g *guest) after(d delay, fn func()) {
	if !d.set || d.never {
		return
	}
	g.timers = append(g.timers, time.AfterFunc(time.Duration(d.ms)*time.Millisecond, fn))
}

// afterLocked is after for actions of the VMM thread: they run under the VMM lock and only
// while this guest is still the VM's guest.
func (g *guest) afterLocked(d delay, fn func()) {
	g.after(d, func() {
		g.vmm.mu.Lock()
		defer g.vmm.mu.Unlock()
		if g.vmm.guest == g {
			fn()
		}
	})
}

func (g *guest) pressPowerButton() {
	v := g.vmm
	if v.config.directives.ignorePowerButton {
		v.log.info("simulator/guest.go", "power button pressed; the guest ignores it")
		return
	}
	if g.powerButtonPressed {
		return
	}
	g.powerButtonPressed = true
	v.writeSerial("[   42.000000] ACPI: Power Button [PWRF]: shutting down\n")
	g.afterLocked(v.config.directives.shutdownDelay, func() {
		v.writeSerial("[   42.100000] reboot: Power down\n")
		v.exit("the guest powered off after the power button")
	})
}

func (v *vmm) stopGuest() {
	if v.guest == nil {
		return
	}
	for _, timer := range v.guest.timers {
		timer.Stop()
	}
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
