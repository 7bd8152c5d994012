package main

// The migration stream between a sending and a receiving simulator, and the URLs both ends
// take. The stream has the phases of Cloud Hypervisor's protocol (vm-migration/src/protocol.rs),
// each a request that the receiver answers OK or Error, so a fault can strike at each:
//
//	start     the protocol version, and sim.migration_fail_at: the one directive the receiver
//	          must know before the config that carries the others has arrived
//	config    the VmConfig, as vm.create received it
//	memory    one per precopy iteration, then a last one with the VM paused; it carries only
//	          the number of bytes, and the sender spends their simulated transfer time itself
//	state     the guest's state (guestState in guest_clock.go)
//	complete  the receiver resumes the VM (`paused`: it leaves it paused, CH's CompletePaused)
//
// The encoding is not CH's binary one but a JSON object per line each way:
//
//	→ {"command":"memory","iteration":2,"bytes":838861}
//	← {"status":"ok"}
//
// As in CH, an Error answer does not say why (the receiver logs it), and the sender never sends
// Abandon: when it gives up it closes the connection, and the receiver reads EOF.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
)

type migrationPhase string

const (
	phaseStart    migrationPhase = "start"
	phaseConfig   migrationPhase = "config"
	phaseMemory   migrationPhase = "memory"
	phaseState    migrationPhase = "state"
	phaseComplete migrationPhase = "complete"
)

// name is the command as CH's logs spell it (Start, Config, …).
func (p migrationPhase) name() string {
	return strings.ToUpper(string(p[:1])) + string(p[1:])
}

// faultAckLost is the value of sim.migration_fail_at with which the receiver completes but its
// acknowledgement of Complete never reaches the sender.
const faultAckLost = "ack"

// migrationFaults are the values sim.migration_fail_at takes: a phase the receiver refuses, or
// faultAckLost.
var migrationFaults = map[string]bool{
	string(phaseStart): true, string(phaseConfig): true, string(phaseMemory): true,
	string(phaseState): true, string(phaseComplete): true, faultAckLost: true,
}

// refusedError is how the sender reports the receiver's Error answer to each command, in the
// words of the real sender (the receiver's reason never reaches it).
var refusedError = map[migrationPhase]string{
	phaseStart:    "Error starting migration",
	phaseConfig:   "Error during config migration",
	phaseMemory:   "Error during dirty memory migration",
	phaseState:    "Error during state migration",
	phaseComplete: "Error completing migration",
}

type migrationRequest struct {
	Command   migrationPhase  `json:"command"`
	Version   int             `json:"version,omitempty"`   // start
	FailAt    string          `json:"fail_at,omitempty"`   // start
	Config    json.RawMessage `json:"config,omitempty"`    // config
	Iteration int             `json:"iteration,omitempty"` // memory
	Bytes     uint64          `json:"bytes,omitempty"`     // memory
	Guest     *guestState     `json:"guest,omitempty"`     // state
	Paused    bool            `json:"paused,omitempty"`    // complete
}

const migrationProtocolVersion = 1

type migrationResponse struct {
	Status string `json:"status"` // "ok" or "error"
}

type migrationConn struct {
	net.Conn
	reader *bufio.Reader
}

func newMigrationConn(conn net.Conn) *migrationConn {
	return &migrationConn{Conn: conn, reader: bufio.NewReader(conn)}
}

func (c *migrationConn) write(message any) error {
	_, err := c.Write(append(mustJSON(message), '\n'))
	return err
}

// read reads one message; a connection that ends before a whole one is io.ErrUnexpectedEOF.
func (c *migrationConn) read(message any) error {
	line, err := c.reader.ReadBytes('\n')
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(line, message)
}

// request sends one command and reads the receiver's answer, with the real sender's errors.
func (c *migrationConn) request(req migrationRequest) error {
	var resp migrationResponse
	if err := c.write(req); err != nil {
		return fmt.Errorf("Socket error: %s", socketErrorText(err))
	}
	if err := c.read(&resp); err != nil {
		return fmt.Errorf("Socket error: %s", socketErrorText(err))
	}
	if resp.Status != "ok" {
		return fmt.Errorf("Failed to send migratable component snapshot: %s", refusedError[req.Command])
	}
	return nil
}

// socketErrorText renders a stream error as Rust's io::Error displays it; an early EOF is what
// read_exact reports.
func socketErrorText(err error) string {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "failed to fill whole buffer"
	}
	return osErrorText(err)
}

// migrationURL is a checked `unix:<path>` or `tcp:<host>:<port>`.
type migrationURL struct {
	network string // "unix" or "tcp"
	address string
}

// errMigrationScheme is a URL that is neither unix: (with a path) nor tcp:.
var errMigrationScheme = errors.New("neither unix:<path> nor tcp:<host>:<port>")

// tcpAddressError is the real program's TcpAddressParseError, as an error chain.
type tcpAddressError struct{ chain []string }

func (e *tcpAddressError) Error() string { return strings.Join(e.chain, ": ") }

// parseMigrationURL checks a URL as both ends' validate() do: errMigrationScheme, or a
// *tcpAddressError for a tcp: address without a host and a 16-bit port.
func parseMigrationURL(url string) (migrationURL, error) {
	if address, ok := strings.CutPrefix(url, "tcp:"); ok {
		if err := checkTCPAddress(address); err != nil {
			return migrationURL{}, err
		}
		return migrationURL{network: "tcp", address: address}, nil
	}
	if path, ok := strings.CutPrefix(url, "unix:"); ok && path != "" {
		return migrationURL{network: "unix", address: path}, nil
	}
	return migrationURL{}, errMigrationScheme
}

// checkTCPAddress is tcp_address_to_server_name: `<host>:<port>` or `[<ipv6>]:<port>`.
func checkTCPAddress(address string) error {
	fail := func(chain ...string) error { return &tcpAddressError{chain: chain} }
	var host, port string
	if rest, bracketed := strings.CutPrefix(address, "["); bracketed {
		h, after, found := strings.Cut(rest, "]")
		if !found {
			return fail("Missing closing ']' for bracketed IPv6 address")
		}
		p, found := strings.CutPrefix(after, ":")
		if !found {
			return fail("Missing port separator after bracketed host")
		}
		host, port = h, p
	} else {
		colon := strings.LastIndex(address, ":")
		if colon < 0 {
			return fail("Missing TCP port")
		}
		host, port = address[:colon], address[colon+1:]
	}
	switch {
	case host == "":
		return fail("Host must not be empty")
	case port == "":
		return fail("Port must not be empty")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		cause := "invalid digit found in string"
		if errors.Is(err, strconv.ErrRange) {
			cause = "number too large to fit in target type"
		}
		return fail("Invalid TCP port: "+port, cause)
	}
	return nil
}

// urlErrorChain is what follows the caller's own message for a URL parseMigrationURL refused.
func urlErrorChain(err error) []string {
	var tcpErr *tcpAddressError
	if errors.As(err, &tcpErr) {
		return tcpErr.chain
	}
	return nil
}

// socketKind names the transport in errors: "UNIX" or "TCP".
func (u migrationURL) socketKind() string {
	if u.network == "unix" {
		return "UNIX"
	}
	return "TCP"
}
