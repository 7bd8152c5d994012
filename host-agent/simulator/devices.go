package main

// The VM's block and network devices, opened when the VM is built (vm.boot) and closed when it
// goes away, as device_manager.rs does:
//   - each disk is opened read-write (or read-only), its format detected and compared with
//     `image_type` (a mismatch fails the boot); a qcow2 image with a backing file needs
//     `backing_files: true`, and its backing file must open; the image is locked with an OFD
//     lock (a write lock, or a read lock when read-only), so a second VMM on the same disk
//     fails as the real one does;
//   - each TAP is opened by name through /dev/net/tun with TUNSETIFF (IFF_TAP, IFF_NO_PI,
//     IFF_VNET_HDR, and IFF_MULTI_QUEUE when the device has more than one queue pair), once
//     per queue pair, then brought UP unless it already is. A missing TAP is created by the
//     kernel only for a process with CAP_NET_ADMIN; without it the boot fails with EPERM.
//     Each queue's descriptor joins Go's poller only once TUNSETIFF has attached it, so the
//     guest's network (tap_link.go) can block on it and set deadlines.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

const (
	fOFDSetLk    = 37 // F_OFD_SETLK
	tunSetIff    = 0x400454ca
	iffTap       = 0x0002
	iffNoPi      = 0x1000
	iffVnetHdr   = 0x4000
	iffMultiQueu = 0x0100
	ifNameSize   = 16
)

var qcow2Magic = []byte{'Q', 'F', 'I', 0xfb}

type openDisk struct {
	config diskConfig
	file   *os.File
}

// openNic is a NIC's TAP: one descriptor per queue pair, in queue order.
type openNic struct {
	config netConfig
	queues []*os.File
}

type devices struct {
	disks []openDisk
	nics  []openNic
}

func (d *devices) close() {
	for _, disk := range d.disks {
		_ = disk.file.Close()
	}
	for _, nic := range d.nics {
		for _, queue := range nic.queues {
			_ = queue.Close()
		}
	}
	d.disks, d.nics = nil, nil
}

// releaseLocks drops the disks' locks and keeps them open, as a migrating source does before it
// sends the VM's final state.
func (d *devices) releaseLocks() error {
	for _, disk := range d.disks {
		unlock := syscall.Flock_t{Type: syscall.F_UNLCK, Whence: 0}
		if err := syscall.FcntlFlock(disk.file.Fd(), fOFDSetLk, &unlock); err != nil {
			return err
		}
	}
	return nil
}

func deviceError(chain ...string) *apiError {
	return apiErr(500, append([]string{"The VM could not boot", "Error from device manager"}, chain...)...)
}

// openDevices opens every disk and TAP of the config; on failure nothing stays open.
func (c *vmConfig) openDevices() (*devices, *apiError) {
	d := &devices{}
	for _, cfg := range c.Disks {
		disk, err := openDiskImage(cfg)
		if err != nil {
			d.close()
			return nil, err
		}
		d.disks = append(d.disks, disk)
	}
	for _, cfg := range c.Net {
		queues, err := openTap(cfg)
		if err != nil {
			d.close()
			return nil, err
		}
		d.nics = append(d.nics, openNic{config: cfg, queues: queues})
	}
	return d, nil
}

func openDiskImage(cfg diskConfig) (openDisk, *apiError) {
	if cfg.Path == "" {
		return openDisk{}, deviceError("No disk path was specified when one was expected")
	}
	flags := os.O_RDWR
	if cfg.Readonly {
		flags = os.O_RDONLY
	}
	file, err := os.OpenFile(cfg.Path, flags, 0)
	if err != nil {
		return openDisk{}, deviceError("Cannot open disk path", osErrorText(err))
	}
	header := make([]byte, 104)
	n, _ := file.ReadAt(header, 0)
	detected := "Raw"
	if n >= 4 && bytes.Equal(header[:4], qcow2Magic) {
		detected = "Qcow2"
	}
	fail := func(chain ...string) (openDisk, *apiError) {
		_ = file.Close()
		return openDisk{}, deviceError(chain...)
	}
	if cfg.ImageType != "" && cfg.ImageType != detected {
		return fail(fmt.Sprintf("Disk image type mismatch: specified %s, detected %s", cfg.ImageType, detected))
	}
	if detected == "Qcow2" && n >= 20 {
		if backing := qcow2BackingFile(file, header); backing != "" {
			if !cfg.BackingFiles {
				return fail("Cannot open disk path", "Failure in qcow", "Backing file support is disabled")
			}
			if err := checkReadable(backing); err != nil {
				return fail("Cannot open disk path", "Failure in qcow", "Backing file open error: "+osErrorText(err))
			}
		}
	}
	lock := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0}
	if cfg.Readonly {
		lock.Type = syscall.F_RDLCK
	}
	if err := syscall.FcntlFlock(file.Fd(), fOFDSetLk, &lock); err != nil {
		return fail("Cannot lock images of all block devices", fmt.Sprintf("The file lock for %s could not be acquired: %s", cfg.Path, osErrorText(err)))
	}
	return openDisk{config: cfg, file: file}, nil
}

// qcow2BackingFile reads the backing file name from a qcow2 header (offset at byte 8, size at 16).
func qcow2BackingFile(file *os.File, header []byte) string {
	offset := binary.BigEndian.Uint64(header[8:16])
	size := binary.BigEndian.Uint32(header[16:20])
	if offset == 0 || size == 0 || size > 1023 {
		return ""
	}
	name := make([]byte, size)
	if _, err := file.ReadAt(name, int64(offset)); err != nil {
		return ""
	}
	return string(name)
}

type ifreqFlags struct {
	name  [ifNameSize]byte
	flags uint16
	_     [22]byte
}

func tapError(chain ...string) *apiError {
	return deviceError(append([]string{"Cannot open tap interface", "Open tap device failed"}, chain...)...)
}

func openTap(cfg netConfig) ([]*os.File, *apiError) {
	if cfg.Tap == "" {
		return nil, deviceError("Cannot open tap interface", "Open tap device failed", "an unnamed TAP is not simulated")
	}
	if len(cfg.Tap) > ifNameSize-1 {
		return nil, tapError(fmt.Sprintf("Interface name too long (max length is %d): %s", ifNameSize-1, cfg.Tap))
	}
	flags := uint16(iffTap | iffNoPi | iffVnetHdr)
	if cfg.queuePairs() > 1 {
		flags |= iffMultiQueu
	}
	var taps []*os.File
	fail := func(chain ...string) ([]*os.File, *apiError) {
		for _, tap := range taps {
			_ = tap.Close()
		}
		return nil, tapError(chain...)
	}
	for i := 0; i < cfg.queuePairs(); i++ {
		fd, err := syscall.Open("/dev/net/tun", os.O_RDWR|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fail("Couldn't open /dev/net/tun", osErrorText(err))
		}
		var req ifreqFlags
		copy(req.name[:], cfg.Tap)
		req.flags = flags
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), tunSetIff, uintptr(unsafe.Pointer(&req))); errno != 0 {
			_ = syscall.Close(fd)
			return fail("Unable to configure tap interface", osErrorText(errno))
		}
		// Only now: a descriptor registered with epoll before TUNSETIFF is never woken.
		taps = append(taps, os.NewFile(uintptr(fd), "/dev/net/tun"))
	}
	if err := enableTap(cfg.Tap); err != nil {
		return fail("Enabling tap interface failed", osErrorText(err))
	}
	return taps, nil
}

// enableTap brings the TAP UP unless it already is (which needs no privilege).
func enableTap(name string) error {
	sock, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(sock)
	var req ifreqFlags
	copy(req.name[:], name)
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(sock), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&req))); errno != 0 {
		return errno
	}
	if req.flags&syscall.IFF_UP != 0 {
		return nil
	}
	req.flags = syscall.IFF_UP
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(sock), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&req))); errno != 0 {
		return errno
	}
	return nil
}
