package main

// The log, in the real program's line format:
//   cloud-hypervisor: 1.234567ms: <vmm> INFO:vmm/src/lib.rs -- message
// Each `-v` raises the level: 0 = warn, 1 = info, 2 = debug, 3+ = trace.

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

type level int

const (
	levelError level = iota
	levelWarn
	levelInfo
	levelDebug
)

var levelNames = map[level]string{levelError: "ERROR", levelWarn: "WARN", levelInfo: "INFO", levelDebug: "DEBUG"}

type logger struct {
	mu  sync.Mutex
	out io.Writer
	max level
}

func openLogger(path string, verbosity int) (*logger, error) {
	l := &logger{out: os.Stderr, max: levelWarn + level(verbosity)}
	if path != "" {
		file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
		if err != nil {
			return nil, err
		}
		l.out = file
	}
	return l, nil
}

func (l *logger) log(lvl level, source, format string, args ...any) {
	if lvl > l.max {
		return
	}
	line := fmt.Sprintf("cloud-hypervisor: %v: <vmm> %s:%s -- %s\n",
		time.Since(processStart), levelNames[lvl], source, fmt.Sprintf(format, args...))
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.out, line)
}

func (l *logger) error(source, format string, args ...any) {
	l.log(levelError, source, format, args...)
}
func (l *logger) warn(source, format string, args ...any) { l.log(levelWarn, source, format, args...) }
func (l *logger) info(source, format string, args ...any) { l.log(levelInfo, source, format, args...) }
func (l *logger) debug(source, format string, args ...any) {
	l.log(levelDebug, source, format, args...)
}
