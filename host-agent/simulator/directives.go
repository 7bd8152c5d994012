package main

// Guest behaviour comes from `sim.*` directives in the kernel command line (payload.cmdline),
// so a test describes a faulty guest in the same request that would boot a real one, and the
// fault travels through the whole stack: control plane → host agent → REST API → VMM.
// docs/simulator.md lists them. A directive the simulator does not understand is logged and
// ignored, as a kernel ignores parameters it does not know.

import (
	"strconv"
	"strings"
	"syscall"
	"time"
)

// delay is a directive's time: a number of milliseconds, or never.
type delay struct {
	ms    int
	never bool
	set   bool
}

func (d delay) duration() time.Duration { return time.Duration(d.ms) * time.Millisecond }

type directives struct {
	bootDelay         delay // how long vm.boot takes
	rebootDelay       delay // how long vm.reboot takes
	ignorePowerButton bool
	shutdownDelay     delay // power button → guest power-off
	powerOffAfter     delay // the guest powers itself off this long after boot
	guestRebootAfter  delay // the guest reboots itself once, this long after its first boot
	crashAfter        delay // the process dies this long after boot
	exitCode          int
	crashSignal       syscall.Signal
	hangAPIAfter      delay // the API stops answering this long after boot
	ignoreSigterm     bool
	garbageEvents     bool
	kernelLoadError   bool // the kernel file opens but cannot be loaded
	rebootError       bool // vm.reboot tears the VM down and fails to boot it again
	markDisk          int  // the guest counts its boots in the first sector of this disk (-1: none)
	echoPort          int  // the guest runs a TCP echo service on this port (0: none)

	// Live migration (migration_send.go, migration_receive.go).
	migrationMiBPerS      int    // simulated bandwidth of the migration stream
	migrationDirtyMiBPerS int    // how fast the running guest dirties its memory during precopy
	migrationFailAt       string // the phase the receiver refuses (a migrationPhase), or "ack"
	migrationStallAfter   int    // precopy stops making progress after this many iterations (-1: never)
	migrationNoConverge   bool   // the guest dirties memory faster than it can be sent
}

var signalNames = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "BUS": syscall.SIGBUS, "FPE": syscall.SIGFPE, "ILL": syscall.SIGILL,
	"KILL": syscall.SIGKILL, "QUIT": syscall.SIGQUIT, "SEGV": syscall.SIGSEGV, "SYS": syscall.SIGSYS,
	"TERM": syscall.SIGTERM, "TRAP": syscall.SIGTRAP, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2,
}

func defaultDirectives() directives {
	return directives{
		bootDelay:     delay{ms: 20, set: true},
		rebootDelay:   delay{ms: 20, set: true},
		shutdownDelay: delay{ms: 100, set: true},
		exitCode:      1,
		markDisk:      -1,

		migrationMiBPerS:      10240,
		migrationDirtyMiBPerS: 64,
		migrationStallAfter:   -1,
	}
}

func parseDelay(value string, neverAllowed bool) (delay, bool) {
	if neverAllowed && value == "never" {
		return delay{never: true, set: true}, true
	}
	ms, err := strconv.Atoi(value)
	if err != nil || ms < 0 {
		return delay{}, false
	}
	return delay{ms: ms, set: true}, true
}

func parseDirectives(cmdline string, log *logger) directives {
	d := defaultDirectives()
	for _, word := range strings.Fields(cmdline) {
		if !strings.HasPrefix(word, "sim.") {
			continue
		}
		name, value, _ := strings.Cut(strings.TrimPrefix(word, "sim."), "=")
		if !d.apply(name, value) {
			log.warn("simulator/directives.go", "ignoring unknown or malformed directive %q", word)
		}
	}
	return d
}

// apply sets one directive and says whether it was understood.
func (d *directives) apply(name, value string) bool {
	delays := map[string]struct {
		target       *delay
		neverAllowed bool
	}{
		"boot_ms":           {&d.bootDelay, true},
		"reboot_ms":         {&d.rebootDelay, true},
		"shutdown_ms":       {&d.shutdownDelay, false},
		"poweroff_ms":       {&d.powerOffAfter, false},
		"guest_reboot_ms":   {&d.guestRebootAfter, false},
		"crash_after_ms":    {&d.crashAfter, false},
		"hang_api_after_ms": {&d.hangAPIAfter, false},
	}
	flags := map[string]*bool{
		"ignore_power_button":   &d.ignorePowerButton,
		"ignore_sigterm":        &d.ignoreSigterm,
		"garbage_events":        &d.garbageEvents,
		"kernel_load_error":     &d.kernelLoadError,
		"reboot_error":          &d.rebootError,
		"migration_no_converge": &d.migrationNoConverge,
	}
	counts := map[string]struct {
		target *int
		min    int
	}{
		"migration_mib_per_s":       {&d.migrationMiBPerS, 1},
		"migration_dirty_mib_per_s": {&d.migrationDirtyMiBPerS, 0},
		"migration_stall_after":     {&d.migrationStallAfter, 0},
	}
	if spec, found := delays[name]; found {
		parsed, ok := parseDelay(value, spec.neverAllowed)
		if ok {
			*spec.target = parsed
		}
		return ok
	}
	if flag, found := flags[name]; found {
		*flag = true
		return value == ""
	}
	if spec, found := counts[name]; found {
		n, err := strconv.Atoi(value)
		if err != nil || n < spec.min {
			return false
		}
		*spec.target = n
		return true
	}
	switch name {
	case "exit_code":
		return setInt(&d.exitCode, value, 0, 255)
	case "mark_disk":
		return setInt(&d.markDisk, value, 0, 25)
	case "echo_port":
		return setInt(&d.echoPort, value, 1, 65535)
	case "migration_fail_at":
		if !migrationFaults[value] {
			return false
		}
		d.migrationFailAt = value
		return true
	case "crash_signal":
		sig, ok := signalNames[strings.TrimPrefix(strings.ToUpper(value), "SIG")]
		if ok {
			d.crashSignal = sig
		}
		return ok
	}
	return false
}

// setInt sets *target to value read as a whole number within [low, high]; false, and nothing
// set, for anything else.
func setInt(target *int, value string, low, high int) bool {
	n, err := strconv.Atoi(value)
	if err != nil || n < low || n > high {
		return false
	}
	*target = n
	return true
}
