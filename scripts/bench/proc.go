package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// server is one process started by the benchmark: a kubestore (with its
// kubeconfig, URL and client config) or a node agent talking to one.
type server struct {
	cmd        *exec.Cmd
	kubeconfig string
	logPath    string
	done       chan error
	url        string
	cfg        *rest.Config
}

// readyClient polls /readyz, which answers anonymous requests.
var readyClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// startServer execs bin on dataDir with a free port and returns once
// /readyz answers 200, with the time from exec to that answer.
func startServer(ctx context.Context, bin, dataDir, logPath string, args []string) (*server, time.Duration, error) {
	return startServerWrapped(ctx, nil, bin, dataDir, logPath, args)
}

// startServerWrapped is startServer with bin run by the command line wrap
// (which ends by exec'ing it: a memory cgroup's, memCgroup.wrap).
func startServerWrapped(ctx context.Context, wrap []string, bin, dataDir, logPath string, args []string) (*server, time.Duration, error) {
	kubeconfig := filepath.Join(dataDir, "admin.kubeconfig")
	// A kubeconfig left by the previous process names its old port.
	if err := os.Remove(kubeconfig); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, 0, err
	}
	start := time.Now()
	s, err := startProcess(wrapped(wrap, bin), logPath, nil, wrappedArgs(wrap, bin, append([]string{"--data-dir", dataDir, "--secure-port", "0"}, args...)...)...)
	if err != nil {
		return nil, 0, err
	}
	s.kubeconfig = kubeconfig
	deadline := time.NewTimer(120 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.url == "" {
			s.url = serverURL(kubeconfig)
		}
		if s.url != "" {
			if resp, err := readyClient.Get(s.url + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ready := time.Since(start)
					cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
					if err != nil {
						s.kill()
						return nil, 0, fmt.Errorf("reading %s: %w", kubeconfig, err)
					}
					// No client-side rate limit: the server is what is measured.
					cfg.QPS = -1
					cfg.Burst = 0
					s.cfg = cfg
					return s, ready, nil
				}
			}
		}
		select {
		case err := <-s.done:
			return nil, 0, fmt.Errorf("kubestore exited before ready: %v\n%s", err, tail(logPath))
		case <-deadline.C:
			s.kill()
			return nil, 0, fmt.Errorf("kubestore not ready within 120s\n%s", tail(logPath))
		case <-ctx.Done():
			s.kill()
			return nil, 0, ctx.Err()
		case <-tick.C:
		}
	}
}

// wrapped is the program to exec for bin run by wrap: wrap's first word,
// or bin; wrappedArgs are its arguments.
func wrapped(wrap []string, bin string) string {
	if len(wrap) > 0 {
		return wrap[0]
	}
	return bin
}

func wrappedArgs(wrap []string, bin string, args ...string) []string {
	if len(wrap) == 0 {
		return args
	}
	return append(append(append([]string{}, wrap[1:]...), bin), args...)
}

// startProcess execs bin with args and env (nil: this process's), its
// output appended to logPath.
func startProcess(bin, logPath string, env []string, args ...string) (*server, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = env
	s := &server{cmd: cmd, logPath: logPath, done: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() { s.done <- cmd.Wait(); logFile.Close() }()
	return s, nil
}

func serverURL(kubeconfig string) string {
	kc, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return ""
	}
	for _, c := range kc.Clusters {
		return c.Server
	}
	return ""
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// stop sends SIGTERM and waits for the process to exit.
func (s *server) stop() error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(40 * time.Second):
		s.kill()
		return errors.New("kubestore did not exit within 40s of SIGTERM")
	}
}

// exited reports whether the process has ended, and how, without waiting;
// the end is kept for stop and kill.
func (s *server) exited() (bool, error) {
	select {
	case err := <-s.done:
		s.done <- err
		return true, err
	default:
		return false, nil
	}
}

func (s *server) kill() {
	s.cmd.Process.Kill()
	<-s.done
}

// tail is the end of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Mem is a sample of /proc/PID/status, in bytes.
type Mem struct {
	VmRSS   int64 `json:"vmRSS"`
	RssAnon int64 `json:"rssAnon"`
	RssFile int64 `json:"rssFile"`
	VmHWM   int64 `json:"vmHWM"`
}

// Mappings splits a process's RSS by what backs it (/proc/PID/smaps):
// the executable, etcd's bbolt database file, other files, and anonymous
// memory (the Go heap, stacks, runtime metadata).
type Mappings struct {
	Binary int64 `json:"binary"`
	DB     int64 `json:"db"`
	Files  int64 `json:"files"`
	Anon   int64 `json:"anon"`
}

func (m Mappings) String() string {
	return fmt.Sprintf("binary %s, bbolt db %s, other files %s, anonymous %s", mib(m.Binary), mib(m.DB), mib(m.Files), mib(m.Anon))
}

func readMappings(pid int) (Mappings, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return Mappings{}, err
	}
	defer f.Close()
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	var m Mappings
	var cur *int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") {
			// A mapping's header: address perms offset dev inode [path].
			path := ""
			if len(fields) >= 6 {
				path = fields[5]
			}
			switch {
			case path == exe:
				cur = &m.Binary
			case strings.HasSuffix(path, "/member/snap/db"):
				cur = &m.DB
			case strings.HasPrefix(path, "/"):
				cur = &m.Files
			default:
				cur = &m.Anon
			}
			continue
		}
		if fields[0] == "Rss:" && len(fields) == 3 && cur != nil {
			n, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return Mappings{}, err
			}
			*cur += n << 10
		}
	}
	return m, sc.Err()
}

func readMem(pid int) (Mem, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Mem{}, err
	}
	defer f.Close()
	var m Mem
	fields := map[string]*int64{"VmRSS:": &m.VmRSS, "RssAnon:": &m.RssAnon, "RssFile:": &m.RssFile, "VmHWM:": &m.VmHWM}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Fields(sc.Text())
		if len(parts) != 3 || parts[2] != "kB" {
			continue
		}
		if p, ok := fields[parts[0]]; ok {
			n, err := strconv.ParseInt(parts[1], 10, 64)
			if err != nil {
				return Mem{}, err
			}
			*p = n << 10
		}
	}
	return m, sc.Err()
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat; it
// is 100 on every Linux architecture Go supports.
const clockTicks = 100

// cpuTime is utime+stime of a process.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name in parentheses may hold spaces; fields follow it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(u+st) * time.Second / clockTicks, nil
}

// cpuPercent is the CPU a process uses over window, in % of one core.
func cpuPercent(ctx context.Context, pid int, window time.Duration) (float64, error) {
	p, err := cpuPercents(ctx, window, pid)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

// cpuPercents is the CPU each process uses over the same window, in % of
// one core: processes that work together (a server and its client) are
// compared on the same seconds.
func cpuPercents(ctx context.Context, window time.Duration, pids ...int) ([]float64, error) {
	before := make([]time.Duration, len(pids))
	for i, pid := range pids {
		d, err := cpuTime(pid)
		if err != nil {
			return nil, err
		}
		before[i] = d
	}
	start := time.Now()
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	elapsed := time.Since(start)
	out := make([]float64, len(pids))
	for i, pid := range pids {
		after, err := cpuTime(pid)
		if err != nil {
			return nil, err
		}
		out[i] = 100 * float64(after-before[i]) / float64(elapsed)
	}
	return out, nil
}

// writeBytes is write_bytes of /proc/PID/io: bytes the process caused to be
// sent to the storage layer.
func writeBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes:"); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no write_bytes in /proc/%d/io", pid)
}

// diskUsage is the space the files under dir take on disk (allocated
// blocks, as du reports).
func diskUsage(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	return total, err
}

// Binary describes the executable under test.
type Binary struct {
	Path     string `json:"path"`
	Bytes    int64  `json:"bytes"`
	Arch     string `json:"arch"`
	Stripped bool   `json:"stripped"`
	// XZBytes is the binary compressed with xz -9, what a firmware
	// image's compressed file system pays; 0 when xz is not installed.
	XZBytes int64 `json:"xzBytes"`
}

func inspectBinary(path string, xz bool) (Binary, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Binary{}, err
	}
	b := Binary{Path: path, Bytes: st.Size()}
	f, err := elf.Open(path)
	if err != nil {
		return b, fmt.Errorf("reading ELF of %s: %w", path, err)
	}
	defer f.Close()
	b.Arch = map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64", elf.EM_ARM: "arm", elf.EM_RISCV: "riscv64", elf.EM_386: "386"}[f.Machine]
	if b.Arch == "" {
		b.Arch = f.Machine.String()
	}
	b.Stripped = f.Section(".symtab") == nil
	if xz {
		b.XZBytes, err = xzSize(path)
	}
	return b, err
}

// xzSize is the size of path compressed with xz -9, or 0 without xz.
func xzSize(path string) (int64, error) {
	xz, err := exec.LookPath("xz")
	if err != nil {
		return 0, nil
	}
	// One thread: multi-threaded xz splits the input into blocks, which
	// compresses worse and depends on the machine's core count.
	cmd := exec.Command(xz, "-9", "-T1", "-c", path)
	var n countingWriter
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &n, &stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("xz -9 %s: %w %s", path, err, stderr.String())
	}
	return int64(n), nil
}

// countingWriter counts the bytes written to it.
type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

// Machine describes where the benchmark ran; the machine may be shared, so
// the load average is recorded before and after.
type Machine struct {
	CPUs        int    `json:"cpus"`
	CPUModel    string `json:"cpuModel"`
	MemTotal    string `json:"memTotal"`
	Kernel      string `json:"kernel"`
	GoVersion   string `json:"goVersion"`
	LoadStart   string `json:"loadAvgStart"`
	LoadEnd     string `json:"loadAvgEnd"`
	StartedUTC  string `json:"startedUTC"`
	DurationSec int    `json:"durationSec"`
}

func describeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: loadAvg(), StartedUTC: time.Now().UTC().Format(time.RFC3339)}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				m.MemTotal = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
