package main

// Command-line parsing with the flags, syntax and usage errors of the real cloud-hypervisor
// (clap): `--flag value` or `--flag=value`, repeatable `-v`, help when there are no arguments,
// and exit status 2 for anything clap would reject. The simulator takes only the flags a
// VMM started without a VM needs; every other flag, a VM on the command line included, is
// a usage error.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

const usageLine = "Usage: cloud-hypervisor [OPTIONS]"

const helpText = `Launch a cloud-hypervisor VMM.

` + usageLine + `

Options:
      --api-socket <api-socket>        HTTP API socket (UNIX domain socket): path=</path/to/a/file> or fd=<fd>.
      --event-monitor <event-monitor>  File to report events on: path=</path/to/a/file> or fd=<fd>
      --log-file <log-file>            Log file. Standard error is used if not specified
  -v...                                Sets the level of debugging output
  -h, --help                           Print help
  -V, --version                        Print version

This is the vmplane Cloud Hypervisor simulator: it runs no guest. See docs/simulator.md.
`

type options struct {
	apiSocket    string
	eventMonitor string
	logFile      string
	verbosity    int
}

// usageError ends the process the way clap does for a bad command line.
func usageError(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "error: "+format+"\n\n%s\n\nFor more information, try '--help'.\n", append(args, usageLine)...)
	os.Exit(2)
}

var valueFlags = map[string]string{
	"--api-socket":    "--api-socket <api-socket>",
	"--event-monitor": "--event-monitor <event-monitor>",
	"--log-file":      "--log-file <log-file>",
}

func parseArgs(args []string) options {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, helpText)
		os.Exit(2)
	}
	var opts options
	seen := map[string]bool{}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "-h" || arg == "--help":
			fmt.Print(helpText)
			os.Exit(0)
		case arg == "-V" || arg == "--version":
			fmt.Printf("cloud-hypervisor v%s\n", simulatorVersion)
			os.Exit(0)
		case strings.HasPrefix(arg, "-v") && strings.Trim(arg[1:], "v") == "":
			opts.verbosity += len(arg) - 1
		case strings.HasPrefix(arg, "--"):
			name, value, hasValue := strings.Cut(arg, "=")
			display, known := valueFlags[name]
			if !known {
				usageError("unexpected argument '%s' found", arg)
			}
			if seen[name] {
				usageError("the argument '%s' cannot be used multiple times", display)
			}
			seen[name] = true
			if !hasValue {
				if i+1 >= len(args) {
					usageError("a value is required for '%s' but none was supplied", display)
				}
				i++
				value = args[i]
			}
			switch name {
			case "--api-socket":
				opts.apiSocket = value
			case "--event-monitor":
				opts.eventMonitor = value
			case "--log-file":
				opts.logFile = value
			}
		default:
			usageError("unexpected argument '%s' found", arg)
		}
	}
	return opts
}

// endpoint is where --api-socket or --event-monitor points: a path or an inherited fd.
type endpoint struct {
	path string
	fd   int
}

// parseEndpoint reads `path=<p>`, `fd=<n>` or, when bareAllowed, a bare path.
func parseEndpoint(flag, value string, bareAllowed bool) (endpoint, error) {
	ep := endpoint{fd: -1}
	if bareAllowed && !strings.Contains(value, "=") {
		ep.path = value
		return ep, nil
	}
	for _, part := range strings.Split(value, ",") {
		key, val, _ := strings.Cut(part, "=")
		switch key {
		case "path":
			ep.path = val
		case "fd":
			fd, err := strconv.Atoi(val)
			if err != nil || fd < 0 {
				return ep, fmt.Errorf("error parsing %s: invalid fd %q", flag, val)
			}
			ep.fd = fd
		default:
			return ep, fmt.Errorf("error parsing %s: unknown option %q", flag, key)
		}
	}
	if (ep.path == "") == (ep.fd < 0) {
		return ep, fmt.Errorf("error parsing %s: exactly one of path= or fd= is required", flag)
	}
	return ep, nil
}
