package main

// What cloud-init in the guest would read from a NoCloud seed: a read-only raw disk whose FAT
// volume is labelled CIDATA, holding meta-data, user-data and network-config. The simulated
// guest reads it with mtools (as a real guest's kernel would mount it) and prints to the
// serial console what cloud-init would apply, so a test can follow the whole chain from the
// API's create request to the guest. meta-data and network-config are YAML; the host agent
// writes them in YAML's JSON form, which is all the simulator parses.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"syscall"
)

type cloudInitSeed struct {
	device        string
	metaData      seedMetaData
	userData      string
	networkConfig seedNetworkConfig
}

type seedMetaData struct {
	InstanceID    string   `json:"instance-id"`
	LocalHostname string   `json:"local-hostname"`
	PublicKeys    []string `json:"public-keys"`
}

type seedNetworkConfig struct {
	Version   int                     `json:"version"`
	Ethernets map[string]seedEthernet `json:"ethernets"`
}

// seedEthernet is an interface of network-config v2, matched to a NIC by its MAC.
type seedEthernet struct {
	Match struct {
		MacAddress string `json:"macaddress"`
	} `json:"match"`
	SetName   string   `json:"set-name"`
	Addresses []string `json:"addresses"`
	MTU       uint32   `json:"mtu"` // 0: not set
	Routes    []struct {
		To  string `json:"to"`
		Via string `json:"via"`
	} `json:"routes"`
}

// findSeed returns the NoCloud seed among the VM's disks, or nil when there is none.
func findSeed(disks []openDisk) (*cloudInitSeed, error) {
	for i, disk := range disks {
		if !disk.config.Readonly || !isCidata(disk.config.Path) {
			continue
		}
		seed := &cloudInitSeed{device: diskDevice(i)}
		metaData, err := mtype(disk.config.Path, "meta-data")
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(metaData), &seed.metaData); err != nil {
			return nil, fmt.Errorf("meta-data: %v", err)
		}
		if seed.userData, err = mtype(disk.config.Path, "user-data"); err != nil {
			return nil, err
		}
		// network-config is optional.
		if networkConfig, err := mtype(disk.config.Path, "network-config"); err == nil {
			if err := json.Unmarshal([]byte(networkConfig), &seed.networkConfig); err != nil {
				return nil, fmt.Errorf("network-config: %v", err)
			}
		}
		return seed, nil
	}
	return nil, nil
}

func isCidata(path string) bool {
	out, err := mtools("mlabel", "-s", "-i", path, "::")
	return err == nil && strings.Contains(strings.ToUpper(out), "CIDATA")
}

func mtype(image, name string) (string, error) {
	out, err := mtools("mtype", "-i", image, "::"+name)
	if err != nil || out == "" {
		return "", fmt.Errorf("cannot read %s from the seed", name)
	}
	return out, nil
}

// mtools runs one mtools command. The process ignores SIGCHLD, as the real program does, so
// the kernel reaps children itself and waiting for one fails with ECHILD: its output is all
// there is to go by.
func mtools(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	if errors.Is(err, syscall.ECHILD) {
		err = nil
	}
	return string(out), err
}

// diskDevice names the i-th virtio disk as the guest's kernel does: vda, vdb, …
func diskDevice(i int) string {
	return "vd" + string(rune('a'+i))
}

// applied is what cloud-init would do with the seed, line by line, for the serial console.
func (s *cloudInitSeed) applied(nics []netConfig) []string {
	lines := []string{
		fmt.Sprintf("cloud-init: NoCloud datasource on /dev/%s (CIDATA)", s.device),
		fmt.Sprintf("cloud-init: instance-id %s", s.metaData.InstanceID),
		fmt.Sprintf("cloud-init: hostname set to %s", s.metaData.LocalHostname),
	}
	for _, name := range s.ethernetNames() {
		eth := s.networkConfig.Ethernets[name]
		if !hasMac(nics, eth.Match.MacAddress) {
			lines = append(lines, fmt.Sprintf("cloud-init: network-config %s: no interface has MAC %s", name, eth.Match.MacAddress))
			continue
		}
		gateway := ""
		for _, route := range eth.Routes {
			if route.To == "default" || route.To == "0.0.0.0/0" {
				gateway = " gateway " + route.Via
			}
		}
		lines = append(lines, fmt.Sprintf("cloud-init: %s (%s) address %s%s", eth.SetName, eth.Match.MacAddress,
			strings.Join(eth.Addresses, ","), gateway))
	}
	for _, key := range s.metaData.PublicKeys {
		lines = append(lines, "cloud-init: authorized ssh key "+key)
	}
	firstLine, _, _ := strings.Cut(s.userData, "\n")
	lines = append(lines, fmt.Sprintf("cloud-init: user-data %d bytes (%s)", len(s.userData), firstLine))
	return lines
}

// ethernetFor is the network-config interface matching the MAC (the first by name when several
// do), as cloud-init applies it; none without a seed.
func (s *cloudInitSeed) ethernetFor(mac string) (seedEthernet, bool) {
	if s == nil {
		return seedEthernet{}, false
	}
	for _, name := range s.ethernetNames() {
		if eth := s.networkConfig.Ethernets[name]; strings.EqualFold(eth.Match.MacAddress, mac) {
			return eth, true
		}
	}
	return seedEthernet{}, false
}

func (s *cloudInitSeed) ethernetNames() []string {
	names := make([]string, 0, len(s.networkConfig.Ethernets))
	for name := range s.networkConfig.Ethernets {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func hasMac(nics []netConfig, mac string) bool {
	for _, nic := range nics {
		if strings.EqualFold(nic.Mac, mac) {
			return true
		}
	}
	return false
}
