package main

// vm.send-migration: the source side of a live migration, as the real program's
// vm_send_migration, MigrationWorker and check_migration do it in v53+.
//
// Theory of operation. The call checks its arguments, takes a copy of vm.info, hands the VM to
// a worker goroutine and answers 204 at once: the migration is asynchronous. While the worker
// runs, the VMM thread is free (ping and vm.info answer, vm.info from the copy) but no longer
// owns the VM, so every change to it fails with "VM is currently migrating", and so does every
// way out of the process (SIGTERM, SIGINT, a guest power-off or reset): it exits 1 (vmm.go).
// The guest runs on meanwhile, its console too.
//
// The worker follows send_migration: Start, Config, precopy (below), then it pauses the VM (the
// downtime begins: `vm pausing`, `vm paused`), sends the memory dirtied since, releases the
// disks' locks so that the destination can take them, and sends State and Complete. When the
// destination acknowledges Complete, it logs the downtime and emits migration-finished, and the
// VMM stops the VM itself (no `vm shutdown` event: check_migration calls the VM's shutdown, not
// the VMM's), deletes it and exits 0: `vm deleted`, `vmm shutdown`. On any failure it emits
// migration-failed and the VMM resumes the VM if it had paused it (`vm resuming`, `vm
// resumed`), without taking back disk locks it had released (CH issue #7111). A Complete whose
// acknowledgement is lost is such a failure, although the destination resumed the VM too: both
// run it, and only the control plane can tell which one must go.
//
// Precopy. The guest's memory is memory.size bytes, sent at sim.migration_mib_per_s, and the
// running guest dirties sim.migration_dirty_mib_per_s meanwhile. Iteration 0 sends all of it,
// each later iteration what the guest dirtied during the one before. Before each iteration
// after the first, precopy converges when what is dirty could be sent within downtime_ms;
// otherwise, once timeout_s has passed since precopy began, the Cancel strategy fails the
// migration and Ignore converges anyway (the real program checks only there, between
// iterations). Each iteration sent emits migration-memory-iteration {id: n}. The transfer time
// is spent for real, so a slow link is slow; with the defaults a 512 MiB VM moves in about
// 50 ms. sim.migration_no_converge makes every iteration resend the whole memory and never
// converge; sim.migration_stall_after=N stops sending after N iterations until timeout_s is up
// (the real program would sit in a blocked write: forever on a Unix socket, about two minutes
// on TCP), then fails as a timeout. A local migration (memory shared with the destination)
// sends no memory: it pauses right after Config.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

type sendMigrationData struct {
	DestinationURL  *string `json:"destination_url"`
	Local           bool    `json:"local"`
	DowntimeMs      *uint64 `json:"downtime_ms"`
	TimeoutS        *uint64 `json:"timeout_s"`
	TimeoutStrategy *string `json:"timeout_strategy"`
}

// parse reads the body as serde would: destination_url is required, the numbers are nonzero,
// the strategy is Cancel (the default) or Ignore.
func (d *sendMigrationData) parse(body []byte) error {
	if err := json.Unmarshal(body, d); err != nil {
		return err
	}
	switch {
	case d.DestinationURL == nil:
		return errors.New("missing field `destination_url`")
	case d.DowntimeMs != nil && *d.DowntimeMs == 0, d.TimeoutS != nil && *d.TimeoutS == 0:
		return errors.New("invalid value: integer `0`, expected a nonzero u64")
	case d.TimeoutStrategy != nil && *d.TimeoutStrategy != "Cancel" && *d.TimeoutStrategy != "Ignore":
		return fmt.Errorf("unknown variant `%s`, expected `Cancel` or `Ignore`", *d.TimeoutStrategy)
	}
	return nil
}

type outgoingMigration struct {
	vmm           *vmm
	url           migrationURL
	local         bool
	downtime      time.Duration // the target
	timeout       time.Duration
	ignoreTimeout bool
	frozenInfo    []byte // vm.info's answer while the migration runs
	wasPaused     bool   // the VM was paused when the migration began: it stays so

	began     time.Time
	pausedAt  time.Time // the downtime begins
	sentBytes uint64
}

func migrationSendError(chain ...string) *apiError {
	return apiErr(500, append([]string{"Error dispatching the migration worker", "Failed to send migratable component snapshot"}, chain...)...)
}

func (v *vmm) sendMigration(body []byte) *apiError {
	var data sendMigrationData
	if err := data.parse(body); err != nil {
		return &apiError{status: 400, chain: []string{"Failed to deserialize JSON", err.Error()}}
	}
	switch {
	case v.migration != nil:
		return migrationSendError("There is already an ongoing migration")
	case v.guest == nil:
		return migrationSendError("VM is not running")
	}
	url, err := parseMigrationURL(*data.DestinationURL)
	if err != nil {
		return migrationSendError(append([]string{"Invalid send migration configuration",
			"Error validating send migration parameters: destination_url must use tcp:<host>:<port> or unix:<path>."},
			urlErrorChain(err)...)...)
	}
	if data.Local && url.network != "unix" {
		return migrationSendError("Invalid send migration configuration",
			"Error validating send migration parameters: local option is only supported with UNIX sockets.")
	}
	m := &outgoingMigration{
		vmm:           v,
		url:           url,
		local:         data.Local,
		downtime:      300 * time.Millisecond,
		timeout:       3600 * time.Second,
		ignoreTimeout: data.TimeoutStrategy != nil && *data.TimeoutStrategy == "Ignore",
		wasPaused:     !v.guest.running(),
	}
	if data.DowntimeMs != nil {
		m.downtime = time.Duration(*data.DowntimeMs) * time.Millisecond
	}
	if data.TimeoutS != nil {
		m.timeout = time.Duration(*data.TimeoutS) * time.Second
	}
	v.log.info("vmm/src/lib.rs", "Sending migration: destination_url=%s,local=%t,tls=false,downtime=%dms,timeout=%ds,timeout_strategy=%s",
		*data.DestinationURL, m.local, m.downtime.Milliseconds(), int64(m.timeout.Seconds()), map[bool]string{false: "Cancel", true: "Ignore"}[m.ignoreTimeout])
	if m.local && !v.config.backedBySharedMemory() {
		return migrationSendError("Local migration requires shared memory or hugepages enabled")
	}
	m.frozenInfo, _ = v.info()
	v.migration = m
	go m.run()
	return nil
}

// run is the migration worker, then the VMM thread's check_migration.
func (m *outgoingMigration) run() {
	v := m.vmm
	v.events.emit("vm", "migration-started", nil)
	err := m.send()
	if err == nil {
		v.events.emit("vm", "migration-finished", nil)
	} else {
		v.events.emit("vm", "migration-failed", nil)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.migration = nil
	if err == nil {
		// The VM is no longer the VMM's: it is stopped directly, then the VMM exits (for good).
		v.tearDown()
		v.exit("the VM migrated")
	}
	v.log.error("vmm/src/lib.rs", "Migration failed: %v", err)
	if !m.wasPaused && !v.guest.running() {
		v.events.emit("vm", "resuming", nil)
		v.guest.resume()
		v.events.emit("vm", "resumed", nil)
		v.log.info("vmm/src/lib.rs", "Resumed VM successfully after failed migration")
	}
}

func (m *outgoingMigration) send() error {
	v := m.vmm
	m.began = time.Now()
	// Nothing changes the config while the VM migrates: reading it needs no lock.
	cfg := v.config
	conn, err := net.Dial(m.url.network, m.url.address)
	if err != nil {
		return fmt.Errorf("Failed to send migratable component snapshot: Error connecting to %s socket: %s", m.url.socketKind(), osErrorText(err))
	}
	wire := newMigrationConn(conn)
	defer wire.Close()
	start := migrationRequest{Command: phaseStart, Version: migrationProtocolVersion, FailAt: cfg.directives.migrationFailAt}
	if err := wire.request(start); err != nil {
		return err
	}
	if err := wire.request(migrationRequest{Command: phaseConfig, Config: mustJSON(cfg.raw)}); err != nil {
		return err
	}
	if m.local {
		m.pause()
	} else if err := m.precopy(wire); err != nil {
		return err
	}
	state, err := m.handOver()
	if err != nil {
		return err
	}
	if err := wire.request(migrationRequest{Command: phaseState, Guest: &state}); err != nil {
		return err
	}
	if err := wire.request(migrationRequest{Command: phaseComplete, Paused: m.wasPaused}); err != nil {
		return err
	}
	v.log.info("vmm/src/lib.rs", "Migration completed after %.1fs with a downtime of %dms (goal was %dms)",
		time.Since(m.began).Seconds(), time.Since(m.pausedAt).Milliseconds(), m.downtime.Milliseconds())
	return nil
}

// precopy sends the memory while the guest runs, until it converges, then pauses the VM and
// sends what is still dirty.
func (m *outgoingMigration) precopy(wire *migrationConn) error {
	v := m.vmm
	d := v.config.directives
	memory := v.config.memorySize()
	dirty := memory
	begin := time.Now()
	iteration := 0
	for ; ; iteration++ {
		if iteration == d.migrationStallAfter {
			v.log.warn("simulator/migration_send.go", "precopy stalls after %d iteration(s) (sim.migration_stall_after)", iteration)
			time.Sleep(time.Until(begin.Add(m.timeout)))
			return m.timedOut()
		}
		if iteration > 0 && !d.migrationNoConverge && m.transferTime(dirty) <= m.downtime {
			break
		}
		if time.Since(begin) >= m.timeout {
			if !m.ignoreTimeout {
				return m.timedOut()
			}
			v.log.info("vmm/src/lib.rs", "Precopy: Pausing VM, ignoring target downtime (%dms) due to timeout (%ds): Estimated downtime: %dms",
				m.downtime.Milliseconds(), int64(m.timeout.Seconds()), m.transferTime(dirty).Milliseconds())
			break
		}
		sending := time.Now()
		if err := m.sendMemory(wire, iteration, dirty); err != nil {
			return err
		}
		v.events.emit("vm", "migration-memory-iteration", map[string]string{"id": strconv.Itoa(iteration)})
		dirty = memory
		if !d.migrationNoConverge {
			dirty = min(memory, uint64(float64(uint64(d.migrationDirtyMiBPerS)<<20)*time.Since(sending).Seconds()))
		}
	}
	m.pause()
	if err := m.sendMemory(wire, iteration, dirty); err != nil {
		return err
	}
	v.log.info("vmm/src/lib.rs", "Precopy complete: iter=%d curr=%dMiB total=%dMiB", iteration+1, mib(dirty), mib(m.sentBytes))
	return nil
}

func (m *outgoingMigration) timedOut() error {
	return fmt.Errorf("Failed to send migratable component snapshot: Precopy: Timeout reached: %ds: migration didn't converge in time",
		int64(m.timeout.Seconds()))
}

// transferTime is how long the bytes take at the simulated bandwidth.
func (m *outgoingMigration) transferTime(bytes uint64) time.Duration {
	bytesPerSecond := float64(uint64(m.vmm.config.directives.migrationMiBPerS) << 20)
	return time.Duration(float64(bytes) / bytesPerSecond * float64(time.Second))
}

func (m *outgoingMigration) sendMemory(wire *migrationConn, iteration int, bytes uint64) error {
	time.Sleep(m.transferTime(bytes))
	m.sentBytes += bytes
	return wire.request(migrationRequest{Command: phaseMemory, Iteration: iteration, Bytes: bytes})
}

func mib(bytes uint64) uint64 { return (bytes + 1<<20 - 1) >> 20 }

// pause stops the guest, on the VMM's lock as the guest's alarms need: the downtime begins.
func (m *outgoingMigration) pause() {
	v := m.vmm
	v.mu.Lock()
	defer v.mu.Unlock()
	m.pausedAt = time.Now()
	if v.guest.running() {
		v.events.emit("vm", "pausing", nil)
		v.guest.pause()
		v.events.emit("vm", "paused", nil)
	}
}

// handOver releases the disks' locks, so that the destination can take them when it builds the
// VM from State, and returns the paused guest's state for it.
func (m *outgoingMigration) handOver() (guestState, error) {
	v := m.vmm
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.devices.releaseLocks(); err != nil {
		return guestState{}, fmt.Errorf("Failed to release a disk lock: %s", osErrorText(err))
	}
	return v.guest.state(), nil
}
