package main

// The VMM: what the real program's VMM thread does, one action at a time.
//
// Theory of operation. `vmm.mu` stands for the real VMM thread: every API action, every guest
// event (power-off, reset) and the SIGTERM/SIGINT handler take it, so a slow vm.boot or
// vm.reboot stalls everything behind it exactly as it does in cloud-hypervisor, and a boot that
// never returns (`sim.boot_ms=never`) leaves SIGKILL as the only way out. The guest is a set of
// alarms set when it boots (guest.go, guest_clock.go); they fire into the same lock. Nothing
// polls: an idle VMM is a process blocked in accept, read and signal wait.
//
// A live migration changes who owns the VM. Receiving one holds the VMM thread for its whole
// length (migration_receive.go). Sending one hands the VM to a worker (migration_send.go), and
// until the worker is done the VMM refuses every change to it with "VM is currently migrating"
// and answers vm.info from a copy taken at the start.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// apiError is an error as the HTTP API reports it: a status and the error chain from the
// outermost error to the root cause.
type apiError struct {
	status int
	chain  []string
}

func (e *apiError) Error() string { return strings.Join(e.chain, ": ") }

func apiErr(status int, chain ...string) *apiError {
	return &apiError{status: status, chain: append([]string{"Error from API"}, chain...)}
}

// osErrorText renders an OS error the way Rust's io::Error displays it.
func osErrorText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		text := errno.Error()
		return fmt.Sprintf("%s%s (os error %d)", strings.ToUpper(text[:1]), text[1:], int(errno))
	}
	return err.Error()
}

type vmm struct {
	mu           sync.Mutex
	log          *logger
	events       *eventMonitor
	socketPath   string // removed on a clean exit; empty with --api-socket fd=
	config       *vmConfig
	serial       serialPort
	devices      *devices // the disks and TAPs of the booted VM
	guest        *guest   // non-nil while a VM is booted
	hangAPI      func()
	rebootedOnce bool               // the guest's own reboot (sim.guest_reboot_ms) happens once, migrations included
	migration    *outgoingMigration // non-nil while the VM is being sent
}

// vmMigrating is VmError::VmMigrating, what every change to a VM being sent fails with.
const vmMigrating = "VM is currently migrating and can't be modified"

const simulatorVersion = "54.0.0-vmplane-simulator"

type pingResponse struct {
	BuildVersion string   `json:"build_version"`
	Version      string   `json:"version"`
	Pid          int      `json:"pid"`
	Features     []string `json:"features"`
}

func (v *vmm) ping() ([]byte, *apiError) {
	return mustJSON(pingResponse{
		BuildVersion: "v" + simulatorVersion,
		Version:      simulatorVersion,
		Pid:          os.Getpid(),
		Features:     []string{"kvm"},
	}), nil
}

func (v *vmm) create(body []byte) *apiError {
	cfg, err := parseVMConfig(body, v.log)
	if err != nil {
		return &apiError{status: 400, chain: []string{"Failed to deserialize JSON", err.Error()}}
	}
	if v.migration != nil {
		return apiErr(500, "The VM could not be created", vmMigrating)
	}
	if v.config != nil {
		return apiErr(500, "The VM could not be created", "VM is already created")
	}
	if cfg.Console != nil && cfg.Console.Mode == "Socket" {
		return apiErr(500, "The VM could not be created", "Error creating console devices",
			"No socket option support for console device")
	}
	serial, err := cfg.openSerial(v.consoleInput)
	if err != nil {
		return apiErr(500, "The VM could not be created", "Error creating console devices",
			"Error creating serial output file", osErrorText(err))
	}
	v.config, v.serial = cfg, serial
	v.log.info("vmm/src/lib.rs", "VM created")
	return nil
}

func (v *vmm) boot() *apiError {
	if v.migration != nil {
		return apiErr(500, "The VM could not boot", vmMigrating)
	}
	v.events.emit("vm", "booting", nil)
	switch {
	case v.config == nil:
		return apiErr(404, "The VM could not boot", "VM config is missing")
	case v.guest != nil:
		return apiErr(500, "The VM could not boot", "VM is already created")
	}
	if err := v.config.validate(); err != nil {
		return apiErr(400, "The VM could not boot", "Failed to validate config", err.Error())
	}
	if err := v.loadPayload(); err != nil {
		return err
	}
	devices, err := v.config.openDevices()
	if err != nil {
		return err
	}
	v.devices = devices
	v.sleep(v.config.directives.bootDelay)
	v.startGuest()
	v.events.emit("vm", "booted", nil)
	return nil
}

// loadPayload opens the kernel and initramfs as the real program does when it builds the VM.
func (v *vmm) loadPayload() *apiError {
	payload := v.config.Payload
	if payload.Kernel != "" {
		if err := checkReadable(payload.Kernel); err != nil {
			return apiErr(500, "The VM could not boot", "Cannot open kernel file", osErrorText(err))
		}
		if v.config.directives.kernelLoadError {
			return apiErr(500, "The VM could not boot", "Cannot load the kernel into memory", "Invalid ELF magic number")
		}
	}
	if payload.Initramfs != "" {
		if err := checkReadable(payload.Initramfs); err != nil {
			return apiErr(500, "The VM could not boot", "Cannot open initramfs file", osErrorText(err))
		}
	}
	return nil
}

func checkReadable(path string) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	return file.Close()
}

func (v *vmm) shutdownVM() *apiError {
	if v.migration != nil {
		return apiErr(500, "The VM could not shutdown", vmMigrating)
	}
	if v.guest == nil {
		return apiErr(500, "The VM could not shutdown", "VM is not running")
	}
	v.tearDown()
	v.events.emit("vm", "shutdown", nil)
	return nil
}

// tearDown stops the guest and closes its devices (the VM object goes away; its config stays).
func (v *vmm) tearDown() {
	v.stopGuest()
	if v.devices != nil {
		v.devices.close()
		v.devices = nil
	}
}

func (v *vmm) reboot() *apiError {
	if v.migration != nil {
		// vm_reboot emits its event before it finds the VM owned by the migration.
		v.events.emit("vm", "rebooting", nil)
		return apiErr(500, "The VM could not reboot", vmMigrating)
	}
	if v.guest == nil {
		return apiErr(404, "The VM could not reboot", "VM is not created")
	}
	if v.config.directives.rebootError {
		// The old VM is already torn down when building the new one fails; the config stays.
		v.events.emit("vm", "rebooting", nil)
		v.tearDown()
		return apiErr(500, "The VM could not reboot", "Cannot load the kernel into memory", "Invalid ELF magic number")
	}
	v.rebootGuest()
	return nil
}

// rebootGuest tears the VM down and boots a new one from the same config, in this process.
func (v *vmm) rebootGuest() {
	v.events.emit("vm", "rebooting", nil)
	v.stopGuest()
	v.events.emit("virtio-device", "reset", map[string]string{"id": rngDeviceID})
	v.sleep(v.config.directives.rebootDelay)
	v.startGuest()
	v.events.emit("vm", "rebooted", nil)
}

// resetVM is the control loop's answer to the guest's reset: a reboot, except that a VM being
// sent cannot be rebooted, and the real control loop then ends with that error (exit 1).
func (v *vmm) resetVM() {
	if v.migration != nil {
		v.events.emit("vm", "rebooting", nil)
		fatal(v.log, "VMM thread exited with error: Error rebooting VM: %s", vmMigrating)
	}
	v.rebootGuest()
}

func (v *vmm) powerButton() *apiError {
	if v.migration != nil {
		return apiErr(500, "Error triggering power button", vmMigrating)
	}
	if v.guest == nil {
		return apiErr(500, "Error triggering power button", "VM is not running")
	}
	v.guest.pressPowerButton()
	return nil
}

// pause is vm_pause then Vm::pause: refused while the VM is being sent or not booted; otherwise
// `vm pausing` comes first, then the state check (only a running VM pauses), then `vm paused`.
func (v *vmm) pause() *apiError {
	switch {
	case v.migration != nil:
		return apiErr(500, "The VM could not be paused", vmMigrating)
	case v.guest == nil:
		return apiErr(500, "The VM could not be paused", "VM is not running")
	}
	v.events.emit("vm", "pausing", nil)
	if !v.guest.running() {
		return apiErr(500, "The VM could not be paused", "Cannot pause VM", "Failed to pause migratable component",
			"Invalid transition: InvalidStateTransition(Paused, Paused)")
	}
	v.guest.pause()
	v.events.emit("vm", "paused", nil)
	return nil
}

// resume is vm_resume then Vm::resume, pause's mirror: only a paused VM resumes.
func (v *vmm) resume() *apiError {
	switch {
	case v.migration != nil:
		return apiErr(500, "The VM could not resume", vmMigrating)
	case v.guest == nil:
		return apiErr(500, "The VM could not resume", "VM is not running")
	}
	v.events.emit("vm", "resuming", nil)
	if v.guest.running() {
		return apiErr(500, "The VM could not resume", "Cannot resume VM", "Failed to resume migratable component",
			"Invalid transition: InvalidStateTransition(Running, Running)")
	}
	v.guest.resume()
	v.events.emit("vm", "resumed", nil)
	return nil
}

func (v *vmm) delete() *apiError {
	if v.migration != nil {
		return apiErr(500, "The VM could not be deleted", vmMigrating)
	}
	v.deleteVM()
	return nil
}

func (v *vmm) deleteVM() {
	if v.guest != nil {
		v.tearDown()
		v.events.emit("vm", "shutdown", nil)
	}
	if v.config != nil {
		v.config = nil
		if v.serial != nil {
			_ = v.serial.Close()
		}
		v.serial = nil
		v.events.emit("vm", "deleted", nil)
	}
}

type vmInfo struct {
	Config           map[string]any `json:"config"`
	State            string         `json:"state"`
	MemoryActualSize uint64         `json:"memory_actual_size"`
	DeviceTree       map[string]any `json:"device_tree"`
}

func (v *vmm) info() ([]byte, *apiError) {
	if v.migration != nil {
		return v.migration.frozenInfo, nil
	}
	if v.config == nil {
		return nil, apiErr(404, "The VM info is not available", "VM is not created")
	}
	// With no VM object (never booted, or shut down) the real program reports Created.
	info := vmInfo{Config: v.config.withDefaults(), State: "Created", MemoryActualSize: v.config.memorySize()}
	if v.guest != nil {
		info.State = "Running"
		if !v.guest.running() {
			info.State = "Paused"
		}
		info.DeviceTree = map[string]any{rngDeviceID: map[string]any{"id": rngDeviceID, "children": []string{}}}
	}
	return mustJSON(info), nil
}

// exit is the real program's vmm_shutdown followed by the end of the process: the VM is shut
// down and deleted, `vmm shutdown` is emitted, the API socket is removed, and the exit code is 0.
// The caller holds v.mu, so nothing else runs in between.
//
// While the VM is being sent, vmm_shutdown fails ("TODO … lifecycle handling while migrating"
// in the real control loop): the VMM thread ends with that error, so the process exits 1 with
// no events and leaves its socket behind. SIGTERM, SIGINT and a guest power-off all end so.
func (v *vmm) exit(why string) {
	v.log.info("vmm/src/lib.rs", "VMM shutting down: %s", why)
	if v.migration != nil {
		fatal(v.log, "VMM thread exited with error: Error shutting down VMM: %s", vmMigrating)
	}
	v.deleteVM()
	v.events.emit("vmm", "shutdown", nil)
	if v.socketPath != "" {
		_ = os.Remove(v.socketPath)
	}
	os.Exit(0)
}

func (v *vmm) onSignal(sig os.Signal) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.config != nil && v.config.directives.ignoreSigterm {
		v.log.warn("vmm/src/lib.rs", "received %v but the VMM is wedged (sim.ignore_sigterm)", sig)
		return
	}
	v.exit(fmt.Sprintf("received %v", sig))
}

// sleep makes the VMM thread busy for a directive's delay; `never` blocks it for good.
func (v *vmm) sleep(d delay) {
	if d.never {
		select {}
	}
	time.Sleep(time.Duration(d.ms) * time.Millisecond)
}

func (v *vmm) writeSerial(text string) {
	if v.serial != nil {
		_, _ = v.serial.Write([]byte(text))
	}
}

// consoleInput is what a serial console client typed: the guest's terminal echoes it.
func (v *vmm) consoleInput(data []byte) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.guest != nil {
		v.guest.typed(data)
	}
}

func mustJSON(value any) []byte {
	data, err := json.Marshal(value)
	if err != nil {
		panic(err)
	}
	return data
}
