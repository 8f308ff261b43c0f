package etcdembed_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/etcdembed"
)

// shortTempDir is a temporary directory whose path is short enough for a
// unix socket below it (sun_path holds 107 bytes).
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func testConfig(dataDir string) config.Config {
	cfg := config.Default()
	cfg.DataDir = dataDir
	cfg.Etcd.StartTimeout = config.Duration{Duration: 30 * time.Second}
	// A small quota keeps bbolt's mapping small on a busy test machine.
	cfg.Etcd.QuotaBackendBytes = 64 << 20
	return cfg
}

func startEtcd(t *testing.T, cfg config.Config) (*etcdembed.Server, error) {
	t.Helper()
	return etcdembed.Start(t.Context(), cfg)
}

func start(t *testing.T, cfg config.Config) *etcdembed.Server {
	t.Helper()
	srv, err := startEtcd(t, cfg)
	if err != nil {
		t.Fatalf("Start(%s): %v", cfg.DataDir, err)
	}
	t.Cleanup(srv.Close)
	return srv
}

func client(t *testing.T, srv *etcdembed.Server) *clientv3.Client {
	t.Helper()
	ccfg, err := etcdembed.ClientConfig(srv.Endpoints(), config.Default().Etcd, config.Default().Log)
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(ccfg)
	if err != nil {
		t.Fatalf("clientv3.New(%q): %v", srv.Endpoints(), err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func put(t *testing.T, c *clientv3.Client, key, value string) {
	t.Helper()
	if _, err := c.Put(t.Context(), key, value); err != nil {
		t.Fatalf("Put(%s): %v", key, err)
	}
}

func get(t *testing.T, c *clientv3.Client, key string) string {
	t.Helper()
	resp, err := c.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("Get(%s) returned %d keys, want 1", key, len(resp.Kvs))
	}
	return string(resp.Kvs[0].Value)
}

// listeningTCP returns the local addresses of the TCP sockets in LISTEN
// state that this process owns, from /proc/self/net/tcp{,6} matched
// against the socket inodes of /proc/self/fd.
func listeningTCP(t *testing.T) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	own := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok {
			own[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var out []string
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		f, err := os.Open(table)
		if errors.Is(err, os.ErrNotExist) {
			continue // no IPv6
		}
		if err != nil {
			t.Fatal(err)
		}
		s := bufio.NewScanner(f)
		s.Scan() // header
		for s.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(s.Text())
			if len(fields) < 10 {
				continue
			}
			const listen = "0A"
			if fields[3] == listen && own[fields[9]] {
				out = append(out, table+" "+fields[1])
			}
		}
		f.Close()
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(out)
	return out
}

// TestListeningTCPSeesListeners proves the check of TestNoTCPListener can
// fail: a listener this process opens is found.
func TestListeningTCPSeesListeners(t *testing.T) {
	before := listeningTCP(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	after := listeningTCP(t)
	want := strings.ToUpper(strconv.FormatInt(int64(port), 16))
	found := false
	for _, a := range after {
		found = found || strings.HasSuffix(a, ":"+strings.Repeat("0", 4-len(want))+want)
	}
	if !found || len(after) != len(before)+1 {
		t.Errorf("listener on port %d not found: before %q, after %q", port, before, after)
	}
}

func TestStart(t *testing.T) {
	before := listeningTCP(t)
	dir := shortTempDir(t)
	srv := start(t, testConfig(dir))

	t.Run("endpoint is the unix socket", func(t *testing.T) {
		sock := etcdembed.SocketPath(datadir.Dir(dir))
		if want := []string{"unix://" + sock}; !slices.Equal(srv.Endpoints(), want) {
			t.Errorf("Endpoints() = %q, want %q", srv.Endpoints(), want)
		}
		if filepath.Dir(sock) != filepath.Join(dir, "etcd") {
			t.Errorf("socket %s is not in <data-dir>/etcd", sock)
		}
		fi, err := os.Stat(sock)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Type() != os.ModeSocket {
			t.Errorf("%s has type %v, want a socket", sock, fi.Mode().Type())
		}
	})
	t.Run("etcd dir is private", func(t *testing.T) {
		fi, err := os.Stat(filepath.Join(dir, "etcd"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("<data-dir>/etcd has mode %v, want 0700", fi.Mode().Perm())
		}
	})
	t.Run("put and get", func(t *testing.T) {
		c := client(t, srv)
		put(t, c, "/registry/test/a", "1")
		if got := get(t, c, "/registry/test/a"); got != "1" {
			t.Errorf("Get = %q, want 1", got)
		}
	})
	t.Run("HTTP endpoints on their own socket", func(t *testing.T) {
		sock := filepath.Join(dir, "etcd", "http.sock")
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", sock)
			},
		}}
		resp, err := hc.Get("http://etcd/health")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
			t.Errorf("GET /health on %s: %d %s", sock, resp.StatusCode, body)
		}
	})
	t.Run("no TCP listener", func(t *testing.T) {
		if after := listeningTCP(t); !slices.Equal(after, before) {
			t.Errorf("listening TCP sockets of this process: before Start %q, after %q", before, after)
		}
	})
	t.Run("no error reported", func(t *testing.T) {
		if err := srv.Failure(); err != nil {
			t.Errorf("Failure() = %v", err)
		}
	})
}

func TestCloseIsIdempotent(t *testing.T) {
	dir := shortTempDir(t)
	srv, err := startEtcd(t, testConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(srv.Close)
		}
		wg.Wait()
		srv.Close()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return")
	}
	// Closed for real: the data dir can be served again.
	start(t, testConfig(dir))
}

func TestDataSurvivesRestart(t *testing.T) {
	dir := shortTempDir(t)
	cfg := testConfig(dir)

	srv, err := startEtcd(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, srv)
	for i := range 10 {
		put(t, c, "/registry/k"+strconv.Itoa(i), "v"+strconv.Itoa(i))
	}
	c.Close()
	srv.Close()

	srv = start(t, cfg)
	c = client(t, srv)
	for i := range 10 {
		if got, want := get(t, c, "/registry/k"+strconv.Itoa(i)), "v"+strconv.Itoa(i); got != want {
			t.Errorf("after restart k%d = %q, want %q", i, got, want)
		}
	}
	put(t, c, "/registry/after", "x")
}

// TestSocketPathLength checks the unix socket limit at its boundary: a
// socket path of 107 bytes works, 108 is refused before anything is
// created, with an error naming --data-dir.
func TestSocketPathLength(t *testing.T) {
	const suffix = "/etcd/etcd.sock"
	cases := []struct {
		name    string
		sockLen int
		wantErr bool
	}{
		{"107 bytes", 107, false},
		{"108 bytes", 108, true},
		{"200 bytes", 200, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := shortTempDir(t)
			pad := tc.sockLen - len(base) - len("/") - len(suffix)
			if pad < 1 {
				t.Skipf("temporary directory %s is too long for this case", base)
			}
			dataDir := filepath.Join(base, strings.Repeat("d", pad))
			if got := len(etcdembed.SocketPath(datadir.Dir(dataDir))); got != tc.sockLen {
				t.Fatalf("socket path has %d bytes, want %d", got, tc.sockLen)
			}
			srv, err := startEtcd(t, testConfig(dataDir))
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("Start with a %d-byte socket path: %v", tc.sockLen, err)
				}
				defer srv.Close()
				c := client(t, srv)
				put(t, c, "/registry/x", "y")
				return
			}
			if err == nil {
				srv.Close()
				t.Fatalf("Start with a %d-byte socket path succeeded", tc.sockLen)
			}
			for _, want := range []string{"--data-dir", dataDir} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused data dir was created: %v", err)
			}
		})
	}
}

// A member whose client listener dies reports it through Failed and
// Failure, as often as asked; Close afterwards still stops it, and a member
// that is closed does not report its stop as a failure.
func TestFailedAfterListenerDies(t *testing.T) {
	srv := start(t, testConfig(shortTempDir(t)))
	if err := srv.Failure(); err != nil {
		t.Fatalf("Failure() of a healthy member = %v", err)
	}
	etcdembed.CloseClientListeners(srv)
	select {
	case <-srv.Failed():
	case <-time.After(30 * time.Second):
		t.Fatal("Failed() not closed 30s after the client listener closed")
	}
	for range 2 {
		if err := srv.Failure(); err == nil || !strings.Contains(err.Error(), "embedded etcd failed") {
			t.Errorf("Failure() = %v, want the member's failure", err)
		}
	}
	srv.Close()

	closed := start(t, testConfig(shortTempDir(t)))
	closed.Close()
	select {
	case <-closed.Failed():
		t.Errorf("a closed member reports a failure: %v", closed.Failure())
	default:
	}
}
