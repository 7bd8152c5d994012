package main

// The REST API over the Unix socket, with the transport of the real program's HTTP library
// (micro_http) rather than Go's net/http, because its quirks are the point:
//   - a body is read only through Content-Length (a chunked body counts as no body);
//   - one request is handled at a time, across all connections (`serveMu`: the HTTP thread);
//   - at most 10 connections are open; the 11th gets a canned 503 and is closed;
//   - a request line or header it cannot parse gets a 400 and the connection is closed.
// Routing and the per-endpoint body rules follow vmm/src/api/http (routes.go).

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

const (
	maxConnections = 10
	maxPayloadSize = 4 << 20
	maxHeaderBytes = 64 << 10
	serverName     = "Cloud Hypervisor API"
)

var serverFullResponse = func() []byte {
	body := `{ "error": "Too many open connections" }`
	return []byte(fmt.Sprintf("HTTP/1.1 503\r\nServer: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		serverName, len(body), body))
}()

type request struct {
	method  string
	path    string
	body    []byte // nil when the request has no body
	closing bool   // the client asked to close the connection after the response
}

type response struct {
	status      int
	body        []byte
	contentType string
	exitAfter   bool // vmm.shutdown: the process ends once the response is out
}

func (r response) encode() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d \r\nServer: %s\r\nConnection: keep-alive\r\n", r.status, serverName)
	if r.status != 204 && r.status != 100 {
		fmt.Fprintf(&b, "Content-Type: %s\r\nContent-Length: %d\r\n", r.contentType, len(r.body))
	}
	b.WriteString("\r\n")
	b.Write(r.body)
	return []byte(b.String())
}

type apiServer struct {
	vmm      *vmm
	listener net.Listener
	serveMu  sync.Mutex
	open     atomic.Int32
}

func (s *apiServer) serve() {
	for {
		conn, err := s.listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.vmm.log.error("vmm/src/api/http/mod.rs", "HTTP server error on accept: %v", err)
			continue
		}
		if s.open.Add(1) > maxConnections {
			s.open.Add(-1)
			_, _ = conn.Write(serverFullResponse)
			_ = conn.Close()
			continue
		}
		go s.serveConnection(conn)
	}
}

// hang makes the HTTP thread stop answering for good: connections are still accepted and
// requests read, but no response is ever written (sim.hang_api_after_ms).
func (s *apiServer) hang() {
	s.serveMu.Lock()
	select {}
}

func (s *apiServer) serveConnection(conn net.Conn) {
	defer s.open.Add(-1)
	defer conn.Close()
	reader := bufio.NewReader(conn)
	for {
		req, err := readRequest(reader, conn)
		if err != nil {
			var parseErr *parseError
			if errors.As(err, &parseErr) {
				body := fmt.Sprintf("{ \"error\": \"%s\nAll previous unanswered requests will be dropped.\" }", parseErr.msg)
				_, _ = conn.Write(response{status: 400, body: []byte(body), contentType: "text/plain"}.encode())
			}
			return
		}
		if !s.respond(conn, req) || req.closing {
			return
		}
	}
}

// respond handles one request on the HTTP thread and says whether the connection lives on.
func (s *apiServer) respond(conn net.Conn, req *request) bool {
	s.serveMu.Lock()
	defer s.serveMu.Unlock()
	resp := route(s.vmm, req)
	if resp.contentType == "" {
		resp.contentType = "application/json"
	}
	_, err := conn.Write(resp.encode())
	if resp.exitAfter {
		s.vmm.mu.Lock()
		s.vmm.exit("vmm.shutdown requested over the API")
	}
	return err == nil
}

type parseError struct{ msg string }

func (e *parseError) Error() string { return e.msg }

var supportedMethods = map[string]bool{"GET": true, "PUT": true, "PATCH": true, "POST": true, "HEAD": true}

// readRequest reads one request, or returns io.EOF when the client closed the connection
// between requests, or a *parseError for bytes micro_http would reject.
func readRequest(reader *bufio.Reader, conn net.Conn) (*request, error) {
	headerBytes := 0
	readLine := func() (string, error) {
		line, err := reader.ReadString('\n')
		headerBytes += len(line)
		if headerBytes > maxHeaderBytes {
			return "", &parseError{"Invalid request: headers too large."}
		}
		return strings.TrimRight(line, "\r\n"), err
	}
	line, err := readLine()
	if err != nil {
		return nil, err
	}
	parts := strings.Split(line, " ")
	if len(parts) != 3 {
		return nil, &parseError{"Invalid request line."}
	}
	if !supportedMethods[parts[0]] {
		return nil, &parseError{"Invalid HTTP method: Unsupported HTTP method."}
	}
	if parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0" {
		return nil, &parseError{"Invalid HTTP version: Unsupported HTTP version."}
	}
	req := &request{method: parts[0], path: absPath(parts[1]), closing: parts[2] == "HTTP/1.0"}
	contentLength, expectContinue := 0, false
	for {
		header, err := readLine()
		if err != nil {
			return nil, err
		}
		if header == "" {
			break
		}
		name, value, ok := strings.Cut(header, ":")
		if !ok {
			return nil, &parseError{fmt.Sprintf("Invalid header. Reason: Invalid header: %s", header)}
		}
		value = strings.TrimSpace(value)
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "content-length":
			contentLength, err = strconv.Atoi(value)
			if err != nil || contentLength < 0 {
				return nil, &parseError{fmt.Sprintf("Invalid header. Reason: Invalid value. Key:Content-Length; Value: %s", value)}
			}
		case "expect":
			expectContinue = strings.EqualFold(value, "100-continue")
		case "connection":
			req.closing = strings.EqualFold(value, "close")
		}
	}
	if contentLength > maxPayloadSize {
		return nil, &parseError{fmt.Sprintf("Request payload with size %d is larger than the limit of %d allowed by server.",
			contentLength, maxPayloadSize)}
	}
	if contentLength > 0 {
		if expectContinue {
			_, _ = conn.Write(response{status: 100}.encode())
		}
		req.body = make([]byte, contentLength)
		if _, err := io.ReadFull(reader, req.body); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// absPath accepts an absolute-form URI too, as micro_http does; a query string is kept, so it
// then matches no route.
func absPath(uri string) string {
	if rest, ok := strings.CutPrefix(uri, "http://"); ok {
		if slash := strings.Index(rest, "/"); slash >= 0 {
			return rest[slash:]
		}
		return "/"
	}
	return uri
}
