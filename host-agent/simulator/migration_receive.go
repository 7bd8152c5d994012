package main

// vm.receive-migration: the destination side of a live migration, as the real program's
// vm_receive_migration does it.
//
// Theory of operation. The whole receive runs on the VMM thread: it holds vmm.mu from the
// request to the answer, so every other API call, vmm.ping included, waits behind it, and so
// does the SIGTERM handler; only SIGKILL ends a VMM waiting for a sender that never comes. It
// binds the listener (migration-receive-ready), accepts one connection
// (migration-receive-started) and runs the receiver's state machine, a command at a time,
// answering each OK or Error (migration_wire.go):
//
//	Established --start--> Started --config--> Configured --memory…--> Configured
//	    --state--> StateReceived --complete--> Completed
//
// Config replaces the config; the serial port is set up from it then, as vm.create would, so a
// relative socket path is bound in this process's working directory. State builds the VM,
// paused: its devices are opened and its disks locked as at boot (`vm restoring`, `vm
// restored`), which works because the source has just released its locks. Complete resumes the
// guest where the source paused it (`vm resuming`, `vm resumed`): no boot, no boot log; then
// the VMM announces the VM's NICs on their TAPs (announce.go). Then migration-receive-finished,
// and 204.
//
// A refused command (a device that cannot be opened, a command out of order, the fault of
// sim.migration_fail_at) aborts: migration-receive-failed, the VM and the config are dropped
// without events, and the call answers 500 "Migration was aborted".
//
// A sender that goes away (killed, or giving up: it never sends Abandon) leaves the receiver
// reading EOF (or a reset), and the call answers 500 at once, with no migration-receive-failed and, as in the
// real program (whose `?` returns before any cleanup), whatever had arrived stays: the config
// after Config (vm.info reads Created), and after State the paused VM with its disks locked.
// The listener's socket file (unix:) stays behind in every case, as the real program leaves it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
)

type receiveMigrationData struct {
	ReceiverURL *string `json:"receiver_url"`
}

type receiveState int

const (
	established receiveState = iota
	started
	configured
	stateReceived
	completed
	aborted
)

var receiveStateNames = [...]string{"Established", "Started", "Configured", "StateReceived", "Completed", "Aborted"}

func migrationReceiveError(chain ...string) *apiError {
	return apiErr(500, append([]string{"Error receiving migration"}, chain...)...)
}

func (v *vmm) receiveMigration(body []byte) *apiError {
	var data receiveMigrationData
	err := json.Unmarshal(body, &data)
	if err == nil && data.ReceiverURL == nil {
		err = errors.New("missing field `receiver_url`")
	}
	if err != nil {
		return &apiError{status: 400, chain: []string{"Failed to deserialize JSON", err.Error()}}
	}
	refuse := func(chain ...string) *apiError {
		return migrationReceiveError(append([]string{"Failed to receive migratable component snapshot"}, chain...)...)
	}
	switch {
	case v.guest != nil:
		return refuse("Can't receive a migration when a VM is already created")
	case v.migration != nil:
		return refuse("There is already an ongoing migration")
	}
	url, err := parseMigrationURL(*data.ReceiverURL)
	if errors.Is(err, errMigrationScheme) {
		return refuse("Invalid receive migration configuration", "Expected receiver_url to either use `tcp` or `unix` prefix")
	}
	if err != nil {
		return refuse(append([]string{"Invalid receive migration configuration",
			"Expected receiver_url in the form of either `tcp:<host>:<port>` or `unix:<path>:`"}, urlErrorChain(err)...)...)
	}
	v.log.info("vmm/src/lib.rs", "Receiving migration: receiver_url=%s,tls=false,zone_updates=[]", *data.ReceiverURL)
	conn, failure := v.acceptMigration(url)
	if failure != nil {
		return failure
	}
	defer conn.Close()
	r := &receiver{vmm: v, wire: newMigrationConn(conn)}
	return r.run()
}

// acceptMigration binds the listener and waits for the sender's connection.
func (v *vmm) acceptMigration(url migrationURL) (net.Conn, *apiError) {
	listener, err := net.Listen(url.network, url.address)
	if err != nil {
		return nil, migrationReceiveError("Failed to receive migratable component snapshot",
			"Error binding to "+url.socketKind()+" socket", osErrorText(err))
	}
	defer listener.Close()
	if unix, ok := listener.(*net.UnixListener); ok {
		unix.SetUnlinkOnClose(false)
	}
	if v.config != nil {
		v.log.warn("vmm/src/lib.rs", "The existing VM config will be overwritten")
	}
	v.events.emit("vm", "migration-receive-ready", nil)
	conn, err := listener.Accept()
	if err != nil {
		return nil, migrationReceiveError("Failed to receive migratable component snapshot",
			"Failed to accept "+url.socketKind()+" migration connection", osErrorText(err))
	}
	v.events.emit("vm", "migration-receive-started", nil)
	return conn, nil
}

type receiver struct {
	vmm    *vmm
	wire   *migrationConn
	state  receiveState
	failAt string // sim.migration_fail_at, from Start
}

func (r *receiver) run() *apiError {
	v := r.vmm
	for r.state != completed && r.state != aborted {
		var req migrationRequest
		if err := r.wire.read(&req); err != nil {
			v.log.error("vmm/src/lib.rs", "Failed to read migration request: sender likely failed, aborting")
			return migrationReceiveError("Socket error", socketErrorText(err))
		}
		v.log.debug("vmm/src/lib.rs", "Command '%s' received", req.Command.name())
		answer := migrationResponse{Status: "ok"}
		if err := r.step(req); err != nil {
			v.log.warn("vmm/src/lib.rs", "Migration aborted as migration command %s failed: %v", req.Command.name(), err)
			r.state, answer.Status = aborted, "error"
		}
		if r.state == completed && r.failAt == faultAckLost {
			v.log.warn("simulator/migration_receive.go", "the acknowledgement of Complete is lost (sim.migration_fail_at=ack)")
			break
		}
		if err := r.wire.write(answer); err != nil {
			return migrationReceiveError("Socket error", socketErrorText(err))
		}
	}
	if r.state == aborted {
		v.events.emit("vm", "migration-receive-failed", nil)
		v.dropReceivedVM()
		return migrationReceiveError("Failed to complete migration for migratable component", "Migration was aborted")
	}
	v.events.emit("vm", "migration-receive-finished", nil)
	return nil
}

// step handles one command and moves the state machine on, or says why it refuses it.
func (r *receiver) step(req migrationRequest) error {
	if r.state == established && req.Command == phaseStart {
		r.failAt = req.FailAt
	}
	if string(req.Command) == r.failAt {
		return fmt.Errorf("refused by sim.migration_fail_at=%s", r.failAt)
	}
	switch {
	case r.state == established && req.Command == phaseStart:
		r.state = started
	case r.state == started && req.Command == phaseConfig:
		return r.configure(req.Config)
	case r.state == configured && req.Command == phaseMemory:
		r.vmm.log.debug("vmm/src/lib.rs", "Memory iteration %d: %d bytes", req.Iteration, req.Bytes)
	case r.state == configured && req.Command == phaseState && req.Guest != nil:
		return r.restore(*req.Guest)
	case r.state == stateReceived && req.Command == phaseComplete:
		r.complete(req.Paused)
	default:
		return fmt.Errorf("Can't handle command %s in current receive state %s", req.Command.name(), receiveStateNames[r.state])
	}
	return nil
}

// configure takes the config from the stream in place of any the VMM had, and sets up its
// serial port.
func (r *receiver) configure(raw json.RawMessage) error {
	v := r.vmm
	cfg, err := parseVMConfig(raw, v.log)
	if err != nil {
		return fmt.Errorf("Error deserialising config: %v", err)
	}
	if v.serial != nil {
		_ = v.serial.Close()
	}
	v.config, v.serial = cfg, nil
	serial, err := cfg.openSerial(v.consoleInput)
	if err != nil {
		return fmt.Errorf("Error creating console devices: %s", osErrorText(err))
	}
	v.serial = serial
	r.state = configured
	return nil
}

// restore builds the VM, paused, from the config and the guest's state.
func (r *receiver) restore(state guestState) error {
	v := r.vmm
	v.events.emit("vm", "restoring", nil)
	devices, err := v.config.openDevices()
	if err != nil {
		// The chain below "Error from API" and "The VM could not boot".
		return fmt.Errorf("Failed restoring the Vm: %s", strings.Join(err.chain[2:], ": "))
	}
	v.devices = devices
	v.restoreGuest(state)
	v.events.emit("vm", "restored", nil)
	r.state = stateReceived
	return nil
}

func (r *receiver) complete(paused bool) {
	v := r.vmm
	if !paused {
		v.events.emit("vm", "resuming", nil)
		v.guest.resume()
		v.events.emit("vm", "resumed", nil)
		v.announceNICs()
	}
	r.state = completed
}

// dropReceivedVM forgets an aborted migration's VM and config, with no events, as the real
// receiver does.
func (v *vmm) dropReceivedVM() {
	v.tearDown()
	if v.serial != nil {
		_ = v.serial.Close()
		v.serial = nil
	}
	v.config = nil
}
