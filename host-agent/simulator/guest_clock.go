package main

// The guest's clock. A guest's alarms (power-off, reboot, crash, … from the directives) are set
// in guest time, the time the guest has run since it booted. The clock stops while the VM is
// paused, as a real guest's does.
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
