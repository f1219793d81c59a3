//go:build linux

package torture

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// SmallFS is a small file system the harness mounted for a fault
// scenario: a size-limited tmpfs (to fill up) or an ext4 image on a loop
// device (to turn read-only). Mounting needs root.
type SmallFS struct {
	// Dir is the mount point.
	Dir string
	// Image is the ext4 image file; empty for tmpfs.
	Image string
	// Size is the file system's size in bytes.
	Size    int64
	mounted bool
}

// MountTmpfs mounts a tmpfs of size bytes on dir, creating dir.
func MountTmpfs(dir string, size int64) (*SmallFS, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("mount tmpfs: %w", err)
	}
	if err := run("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir); err != nil {
		return nil, fmt.Errorf("mount a %d-byte tmpfs on %s (needs root): %w", size, dir, err)
	}
	return &SmallFS{Dir: dir, Size: size, mounted: true}, nil
}

// MountExt4 makes an ext4 image of size bytes at image and mounts it on
// dir through a loop device, with errors=remount-ro so that a file system
// error turns it read-only as a failing disk would.
func MountExt4(dir, image string, size int64) (*SmallFS, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("mount ext4: %w", err)
	}
	f, err := os.Create(image)
	if err != nil {
		return nil, fmt.Errorf("mount ext4: %w", err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("mount ext4: make image: %w", err)
	}
	if err := run("mkfs.ext4", "-q", "-F", image); err != nil {
		return nil, fmt.Errorf("mount ext4: mkfs.ext4 (package e2fsprogs): %w", err)
	}
	fs := &SmallFS{Dir: dir, Image: image, Size: size}
	if err := fs.mountImage(); err != nil {
		return nil, err
	}
	return fs, nil
}

func (fs *SmallFS) mountImage() error {
	var err error
	// A loop device freed by an unmount a moment ago may still be busy.
	for range 20 {
		if err = run("mount", "-o", "loop,errors=remount-ro", fs.Image, fs.Dir); err == nil {
			fs.mounted = true
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("mount %s on %s through a loop device (needs root): %w", fs.Image, fs.Dir, err)
}

// Unmount unmounts the file system; the image file stays. Idempotent.
func (fs *SmallFS) Unmount() error {
	if !fs.mounted {
		return nil
	}
	var err error
	for range 50 {
		if err = run("umount", fs.Dir); err == nil {
			fs.mounted = false
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("unmount %s: %w", fs.Dir, err)
}

// Close unmounts the file system and removes the image.
func (fs *SmallFS) Close() error {
	err := fs.Unmount()
	if fs.Image != "" {
		if rerr := os.Remove(fs.Image); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	return err
}

// Fill writes a ballast file named name into the file system until it is
// full and returns the ballast's path.
func (fs *SmallFS) Fill(name string) (string, error) {
	return fs.Reserve(name, 0)
}

// Reserve writes a ballast file named name until at most leave bytes are
// free, and returns the ballast's path.
func (fs *SmallFS) Reserve(name string, leave int64) (string, error) {
	path := filepath.Join(fs.Dir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", fmt.Errorf("fill %s: %w", fs.Dir, err)
	}
	defer f.Close()
	block := make([]byte, 64<<10)
	for size := len(block); size >= 512; {
		free, err := fs.Free()
		if err != nil {
			return "", err
		}
		if free <= leave {
			break
		}
		if _, err := f.Write(block[:min(int64(size), max(free-leave, 512))]); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				return "", fmt.Errorf("fill %s: %w", fs.Dir, err)
			}
			size /= 2
		}
	}
	return path, nil
}

// Free reports the bytes available in the file system.
func (fs *SmallFS) Free() (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(fs.Dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", fs.Dir, err)
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// FailReadOnly makes the ext4 file system fail as a disk with errors does:
// ext4 records an error and, under errors=remount-ro, turns read-only at
// once, files already open for writing included.
func (fs *SmallFS) FailReadOnly() error {
	dev, err := mountSource(fs.Dir)
	if err != nil {
		return err
	}
	ctl := filepath.Join("/sys/fs/ext4", filepath.Base(dev), "trigger_fs_error")
	if err := os.WriteFile(ctl, []byte("torture: simulated disk failure\n"), 0); err != nil {
		return fmt.Errorf("trigger an ext4 error on %s: %w", dev, err)
	}
	return nil
}

// waitReadOnly waits up to limit for the mount to show as read-only: "ro"
// in its options, or ext4's "emergency_ro" after an error.
func (fs *SmallFS) waitReadOnly(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		m, err := readMount(fs.Dir)
		if err != nil {
			return err
		}
		if m.readOnly() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still writable %v after the ext4 error", fs.Dir, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Repair unmounts the failed ext4 file system, checks it with e2fsck (which
// replays its journal) and mounts it again read-write.
func (fs *SmallFS) Repair() error {
	if err := fs.Unmount(); err != nil {
		return err
	}
	cmd := exec.Command("e2fsck", "-f", "-y", fs.Image)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	// Status 1 and 2 mean e2fsck fixed something, which a journal replay
	// after an abort does.
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() <= 2) {
		return fmt.Errorf("e2fsck %s: %w: %s", fs.Image, err, out)
	}
	return fs.mountImage()
}

// mountSource returns the device mounted on dir.
func mountSource(dir string) (string, error) {
	m, err := readMount(dir)
	return m.source, err
}

// readMount reads the entry of the mount on dir from
// /proc/self/mountinfo.
func readMount(dir string) (mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return mountEntry{}, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	return findMount(f, dir)
}

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	options, source, superOptions string
}

// readOnly reports whether the mount or its file system is read-only.
func (m mountEntry) readOnly() bool {
	for _, o := range strings.Split(m.options+","+m.superOptions, ",") {
		if o == "ro" || o == "emergency_ro" {
			return true
		}
	}
	return false
}

// findMount parses mountinfo lines: "id parent major:minor root
// mountpoint options optional... - fstype source superoptions". The last
// mount on dir wins.
func findMount(r io.Reader, dir string) (mountEntry, error) {
	var found mountEntry
	ok := false
	lines := bufio.NewScanner(r)
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) < 6 || f[4] != dir {
			continue
		}
		for i, x := range f {
			if x == "-" && i+3 < len(f) {
				found, ok = mountEntry{options: f[5], source: f[i+2], superOptions: f[i+3]}, true
			}
		}
	}
	if !ok {
		return mountEntry{}, fmt.Errorf("no mount on %s", dir)
	}
	return found, nil
}

// run runs a command and returns its output with any error.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
