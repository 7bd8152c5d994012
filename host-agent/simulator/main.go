// Command cloud-hypervisor is vmplane's stand-in for Cloud Hypervisor: the same command-line
// flags, the same REST API subset over a Unix socket with the real status codes and quirks, the
// same event-monitor file and the same exit behaviour, with no guest inside. See
// docs/simulator.md for what it does and the `sim.*` kernel command-line directives that make
// the simulated guest misbehave.
//
// It stays small on purpose (one Go runtime, GOMAXPROCS 1, no polling), so thousands can run
// on one machine.
package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
)

// apiSocketLock holds the exclusive lock on `<socket>.lock` for the life of the process (a
// package variable, so the garbage collector never closes it and drops the lock).
var apiSocketLock *os.File

func main() {
	runtime.GOMAXPROCS(1)
	syscall.Umask(0o077)
	opts := parseArgs(os.Args[1:])

	log, err := openLogger(opts.logFile, opts.verbosity)
	if err != nil {
		fatal(nil, "Error creating log file: %v", osErrorText(err))
	}
	events := &eventMonitor{log: log}
	if opts.eventMonitor != "" {
		ep, err := parseEndpoint("--event-monitor", opts.eventMonitor, false)
		if err != nil {
			fatal(log, "%v", err)
		}
		if events, err = openEventMonitor(ep, log); err != nil {
			fatal(log, "Error opening event monitor file: %s", osErrorText(err))
		}
	}
	v := &vmm{log: log, events: events}
	events.emit("vmm", "starting", nil)

	signal.Ignore(syscall.SIGCHLD)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)

	if opts.apiSocket != "" {
		server, err := startAPI(v, opts.apiSocket)
		if err != nil {
			fatal(log, "%v", err)
		}
		v.hangAPI = server.hang
		go server.serve()
	}
	for sig := range signals {
		v.onSignal(sig)
	}
}

func startAPI(v *vmm, value string) (*apiServer, error) {
	ep, err := parseEndpoint("--api-socket", value, true)
	if err != nil {
		return nil, err
	}
	var listener net.Listener
	if ep.fd >= 0 {
		listener, err = net.FileListener(os.NewFile(uintptr(ep.fd), "api-socket"))
	} else {
		listener, err = listenOnPath(ep.path)
		v.socketPath = ep.path
	}
	if err != nil {
		return nil, err
	}
	return &apiServer{vmm: v, listener: listener}, nil
}

// listenOnPath binds the API socket the way v53+ does: take an exclusive lock on
// `<path>.lock` (a live VMM on the same path holds it), remove a stale socket left by a
// crashed one, then bind.
func listenOnPath(path string) (net.Listener, error) {
	lock, err := os.OpenFile(path+".lock", os.O_WRONLY|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("Error creating API server socket: %s", osErrorText(err))
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = lock.Close()
		if err == syscall.EWOULDBLOCK {
			return nil, fmt.Errorf("API socket in use: %s", path)
		}
		return nil, fmt.Errorf("Error creating API server socket: %s", osErrorText(err))
	}
	apiSocketLock = lock
	_ = os.Remove(path)
	listener, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("Error creating API server socket: %s", osErrorText(err))
	}
	listener.(*net.UnixListener).SetUnlinkOnClose(false)
	return listener, nil
}

// fatal is a start-up error: logged, printed, exit code 1.
func fatal(log *logger, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if log != nil {
		log.error("cloud-hypervisor/src/main.rs", "%s", msg)
	}
	fmt.Fprintf(os.Stderr, "Error: %s\n", msg)
	os.Exit(1)
}
