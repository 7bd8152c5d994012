package main

// The VmConfig of vm.create. Like the real program, vm.create only deserialises it (so a wrong
// type or an unknown console mode is a 400) and validates nothing until boot. vm.info echoes it
// back with the real program's defaults filled in.

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

type payloadConfig struct {
	Kernel    string `json:"kernel,omitempty"`
	Firmware  string `json:"firmware,omitempty"`
	Initramfs string `json:"initramfs,omitempty"`
	Cmdline   string `json:"cmdline,omitempty"`
}

type cpusConfig struct {
	BootVcpus uint32 `json:"boot_vcpus"`
	MaxVcpus  uint32 `json:"max_vcpus"`
}

type memoryConfig struct {
	Size      uint64 `json:"size"`
	Shared    bool   `json:"shared,omitempty"`
	Hugepages bool   `json:"hugepages,omitempty"`
}

var consoleModes = []string{"Off", "Pty", "Tty", "File", "Socket", "Null"}

type consoleMode string

func (m *consoleMode) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	for _, mode := range consoleModes {
		if s == mode {
			*m = consoleMode(s)
			return nil
		}
	}
	return fmt.Errorf("unknown variant `%s`, expected one of `%s`", s, strings.Join(consoleModes, "`, `"))
}

type consoleConfig struct {
	Mode   consoleMode `json:"mode"`
	File   string      `json:"file,omitempty"`
	Socket string      `json:"socket,omitempty"`
}

// diskConfig is the part of DiskConfig the simulator acts on.
type diskConfig struct {
	Path         string `json:"path"`
	Readonly     bool   `json:"readonly"`
	ImageType    string `json:"image_type,omitempty"`
	BackingFiles bool   `json:"backing_files"`
	ID           string `json:"id,omitempty"`
}

// netConfig is the part of NetConfig the simulator acts on.
type netConfig struct {
	Tap       string `json:"tap,omitempty"`
	Mac       string `json:"mac,omitempty"`
	NumQueues int    `json:"num_queues,omitempty"`
	ID        string `json:"id,omitempty"`
}

// queuePairs is how many TAP queues the device opens: num_queues counts RX and TX apart, and
// defaults to 2 (one pair).
func (n netConfig) queuePairs() int {
	if n.NumQueues < 2 {
		return 1
	}
	return n.NumQueues / 2
}

type vmConfig struct {
	Payload *payloadConfig `json:"payload"`
	Cpus    *cpusConfig    `json:"cpus"`
	Memory  *memoryConfig  `json:"memory"`
	Serial  *consoleConfig `json:"serial"`
	Console *consoleConfig `json:"console"`
	Disks   []diskConfig   `json:"disks"`
	Net     []netConfig    `json:"net"`

	raw        map[string]json.RawMessage
	directives directives
}

const defaultMemorySize = 512 << 20

func parseVMConfig(body []byte, log *logger) (*vmConfig, error) {
	var cfg vmConfig
	if err := json.Unmarshal(body, &cfg); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, &cfg.raw); err != nil {
		return nil, err
	}
	cmdline := ""
	if cfg.Payload != nil {
		cmdline = cfg.Payload.Cmdline
	}
	cfg.directives = parseDirectives(cmdline, log)
	return &cfg, nil
}

func (c *vmConfig) memorySize() uint64 {
	if c.Memory == nil {
		return defaultMemorySize
	}
	return c.Memory.Size
}

// backedBySharedMemory is what a local migration needs: guest memory another process can map.
func (c *vmConfig) backedBySharedMemory() bool {
	return c.Memory != nil && (c.Memory.Shared || c.Memory.Hugepages)
}

// withDefaults is the config as vm.info shows it.
func (c *vmConfig) withDefaults() map[string]any {
	out := map[string]any{}
	for key, value := range c.raw {
		out[key] = value
	}
	defaults := map[string]any{
		"cpus":    cpusConfig{BootVcpus: 1, MaxVcpus: 1},
		"memory":  memoryConfig{Size: defaultMemorySize},
		"serial":  consoleConfig{Mode: "Null"},
		"console": consoleConfig{Mode: "Tty"},
		"rng":     map[string]string{"src": "/dev/urandom"},
	}
	for key, value := range defaults {
		if raw, present := c.raw[key]; !present || string(raw) == "null" {
			out[key] = value
		}
	}
	return out
}

// validate is the part of the real boot-time validation the simulator can check.
func (c *vmConfig) validate() error {
	if c.Payload == nil || (c.Payload.Kernel == "" && c.Payload.Firmware == "") {
		return fmt.Errorf("No kernel specified")
	}
	if c.Cpus != nil && c.Cpus.MaxVcpus < c.Cpus.BootVcpus {
		return fmt.Errorf("Max is less than boot")
	}
	if c.Cpus != nil && c.Cpus.BootVcpus == 0 {
		return fmt.Errorf("Number of vCPUs cannot be zero")
	}
	return nil
}

// openSerial creates the serial output at vm.create time, as the real program does: a File is
// created (truncated), a Socket is bound (an existing path is an error), a Tty is stdout.
func (c *vmConfig) openSerial(input func([]byte)) (serialPort, error) {
	if c.Serial == nil {
		return nil, nil
	}
	switch c.Serial.Mode {
	case "File":
		return os.OpenFile(c.Serial.File, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	case "Socket":
		return listenSerialSocket(c.Serial.Socket, input)
	case "Tty":
		return stdoutPort{}, nil
	}
	return nil, nil
}
