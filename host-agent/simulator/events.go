package main

// The event monitor, in the real program's format: every event is a pretty-printed JSON object
// followed by a blank line ("\n\n"), with a timestamp measured from process start. Like the
// real program it writes each event with one write() and ignores write errors.

import (
	"encoding/json"
	"os"
	"sync"
	"time"
)

type timestamp struct {
	Secs  int64 `json:"secs"`
	Nanos int64 `json:"nanos"`
}

type event struct {
	Timestamp  timestamp         `json:"timestamp"`
	Source     string            `json:"source"`
	Event      string            `json:"event"`
	Properties map[string]string `json:"properties"`
}

type eventMonitor struct {
	mu   sync.Mutex
	file *os.File // nil without --event-monitor: events are only logged
	log  *logger
}

var processStart = time.Now()

func openEventMonitor(ep endpoint, log *logger) (*eventMonitor, error) {
	if ep.fd >= 0 {
		return &eventMonitor{file: os.NewFile(uintptr(ep.fd), "event-monitor"), log: log}, nil
	}
	file, err := os.OpenFile(ep.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return nil, err
	}
	return &eventMonitor{file: file, log: log}, nil
}

func (m *eventMonitor) emit(source, name string, properties map[string]string) {
	elapsed := time.Since(processStart)
	m.log.info("vmm/src/lib.rs", "Event: source = %s event = %s", source, name)
	if m.file == nil {
		return
	}
	ev := event{
		Timestamp:  timestamp{Secs: int64(elapsed / time.Second), Nanos: int64(elapsed % time.Second)},
		Source:     source,
		Event:      name,
		Properties: properties,
	}
	data, err := json.MarshalIndent(ev, "", "  ")
	if err != nil {
		return
	}
	m.write(append(data, '\n', '\n'))
}

// write puts raw bytes into the event file; sim.garbage_events uses it to corrupt the stream.
func (m *eventMonitor) write(data []byte) {
	if m.file == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _ = m.file.Write(data)
}
