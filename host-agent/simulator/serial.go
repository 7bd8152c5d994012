package main

// The serial port's output, as vm.create sets it up: a file (mode File), standard output (Tty)
// or a Unix socket (Socket). In Socket mode the real program serves one client at a time (a new
// connection drops the old one), sends the client what it types to the guest, and keeps what
// the guest printed while no client was connected in a ring buffer of 1 MiB (v53+), which it
// flushes to the next client.

import (
	"net"
	"os"
	"sync"
	"time"
)

const serialBufferBytes = 1 << 20

// A slow client must not wedge the VMM thread, which holds its lock while the guest prints.
const serialWriteTimeout = 2 * time.Second

type serialPort interface {
	Write(p []byte) (int, error)
	Close() error
}

type stdoutPort struct{}

func (stdoutPort) Write(p []byte) (int, error) { return os.Stdout.Write(p) }
func (stdoutPort) Close() error                { return nil }

type socketConsole struct {
	path     string
	listener net.Listener
	input    func([]byte)
	mu       sync.Mutex
	client   net.Conn
	buffer   []byte
}

func listenSerialSocket(path string, input func([]byte)) (*socketConsole, error) {
	listener, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	listener.(*net.UnixListener).SetUnlinkOnClose(false)
	s := &socketConsole{path: path, listener: listener, input: input}
	go s.accept()
	return s, nil
}

func (s *socketConsole) accept() {
	for {
		conn, err := s.listener.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.client != nil {
			_ = s.client.Close()
		}
		s.client = conn
		pending := s.buffer
		s.buffer = nil
		s.mu.Unlock()
		if len(pending) > 0 {
			_, _ = s.Write(pending)
		}
		go s.read(conn)
	}
}

func (s *socketConsole) read(conn net.Conn) {
	buf := make([]byte, 4096)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			s.input(append([]byte(nil), buf[:n]...))
		}
		if err != nil {
			s.mu.Lock()
			if s.client == conn {
				s.client = nil
			}
			s.mu.Unlock()
			return
		}
	}
}

func (s *socketConsole) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		_ = s.client.SetWriteDeadline(time.Now().Add(serialWriteTimeout))
		if _, err := s.client.Write(p); err == nil {
			return len(p), nil
		}
		_ = s.client.Close()
		s.client = nil
	}
	s.buffer = append(s.buffer, p...)
	if excess := len(s.buffer) - serialBufferBytes; excess > 0 {
		s.buffer = s.buffer[excess:]
	}
	return len(p), nil
}

// Close stops serving and removes the socket, as the real program does when the VM goes away.
func (s *socketConsole) Close() error {
	_ = s.listener.Close()
	_ = os.Remove(s.path)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		_ = s.client.Close()
		s.client = nil
	}
	return nil
}
