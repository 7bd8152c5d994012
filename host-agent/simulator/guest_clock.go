package main

// The guest's clock. A guest's alarms (power-off, reboot, crash, … from the directives) are set
// in guest time, the time the guest has run since it booted. The clock stops while the VM is
// paused, as a real guest's does, and a live migration carries it to the destination with the
// rest of the guest's state: a guest that was to power off 5 s after boot still powers off 5 s
// after boot, on whichever host it then runs, and an alarm already past on the source does not
// ring again on the destination.
//
// Every method runs on the VMM thread (under vmm.mu); an alarm's function runs on a timer's
// goroutine, and takes the lock itself when it needs it (guest.locked).

import (
	"slices"
	"time"
)

type clock struct {
	uptime  time.Duration // run before `resumed`
	resumed time.Time     // when the guest last started running; zero while paused
	alarms  []*alarm      // pending, in no order
}

type alarm struct {
	at    time.Duration // guest time at which it rings
	fn    func()
	timer *time.Timer // nil while the clock is stopped
}

func (c *clock) running() bool { return !c.resumed.IsZero() }

// now is the guest time.
func (c *clock) now() time.Duration {
	if c.running() {
		return c.uptime + time.Since(c.resumed)
	}
	return c.uptime
}

// at sets an alarm at guest time t; one in the past rings as soon as the clock runs.
func (c *clock) at(t time.Duration, fn func()) {
	a := &alarm{at: t, fn: fn}
	c.alarms = append(c.alarms, a)
	if c.running() {
		c.arm(a)
	}
}

func (c *clock) arm(a *alarm) {
	a.timer = time.AfterFunc(a.at-c.now(), a.fn)
}

// pause stops the clock. An alarm whose timer already fired is dropped: it has rung, or is
// ringing now.
func (c *clock) pause() {
	c.uptime = c.now()
	c.resumed = time.Time{}
	c.alarms = slices.DeleteFunc(c.alarms, func(a *alarm) bool {
		rang := a.timer != nil && !a.timer.Stop()
		a.timer = nil
		return rang
	})
}

func (c *clock) resume() {
	c.resumed = time.Now()
	for _, a := range c.alarms {
		c.arm(a)
	}
}

// stopAlarms clears every alarm for good: the guest is gone.
func (c *clock) stopAlarms() {
	for _, a := range c.alarms {
		if a.timer != nil {
			a.timer.Stop()
		}
	}
	c.alarms = nil
}

// guestState is what a migration's State command carries of the guest: its clock, the hostname
// cloud-init gave it at boot (for the login prompt), the power-button press it is acting on,
// and whether it has already rebooted itself (sim.guest_reboot_ms happens once).
type guestState struct {
	UptimeNs        int64  `json:"uptime_ns"`
	Hostname        string `json:"hostname"`
	PowerButtonAtNs int64  `json:"power_button_at_ns"` // -1: not pressed
	RebootedOnce    bool   `json:"rebooted_once"`
}

// state is the guest's state for the migration stream; the guest is paused by then.
func (g *guest) state() guestState {
	return guestState{
		UptimeNs:        int64(g.now()),
		Hostname:        g.hostname,
		PowerButtonAtNs: int64(g.powerButtonAt),
		RebootedOnce:    g.vmm.rebootedOnce,
	}
}

// restoreGuest builds the guest a migration brings in, paused, as the source paused it: no
// boot, no boot log; the alarms still ahead of its clock are set, those behind it are not. Its
// network comes up from the config and the seed as at boot, so with the same addresses.
func (v *vmm) restoreGuest(s guestState) {
	v.rebootedOnce = s.RebootedOnce
	g := &guest{vmm: v, hostname: s.Hostname, powerButtonAt: time.Duration(s.PowerButtonAtNs)}
	g.uptime = time.Duration(s.UptimeNs)
	v.guest = g
	g.setAlarms()
	g.alarms = slices.DeleteFunc(g.alarms, func(a *alarm) bool { return a.at <= g.uptime })
	seed, err := findSeed(v.devices.disks)
	if err != nil {
		v.log.warn("simulator/guest_clock.go", "the guest's network has no seed on this host: %v", err)
	}
	g.network, _ = startNetwork(v.devices.nics, seed, v.config.directives.echoPort, v.log)
}
