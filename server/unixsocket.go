package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/access"
	"github.com/kubestore/kubestore/config"
)

// unixSocket is the --unix-socket listener: plain HTTP (the socket's mode
// and group are its transport security), each connection authenticated by
// its peer's uid.
type unixSocket struct {
	path     string
	listener net.Listener
}

// listenUnix creates the socket (replacing a stale one) with mode 0660 and
// the configured group.
func listenUnix(s config.Server) (*unixSocket, error) {
	fail := func(err error) error {
		return fmt.Errorf("invalid --%s %q: %w", config.FlagUnixSocket, s.UnixSocket, err)
	}
	if fi, err := os.Lstat(s.UnixSocket); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fail(errors.New("exists and is not a socket"))
		}
		if err := os.Remove(s.UnixSocket); err != nil {
			return nil, fail(err)
		}
	}
	ln, err := net.Listen("unix", s.UnixSocket)
	if err != nil {
		return nil, fail(err)
	}
	if err := os.Chmod(s.UnixSocket, 0o660); err != nil {
		ln.Close()
		return nil, fail(err)
	}
	if s.UnixSocketGroup != "" {
		gid, err := lookupGroup(s.UnixSocketGroup)
		if err == nil {
			err = os.Chown(s.UnixSocket, -1, gid)
		}
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("invalid --%s %q: %w", config.FlagUnixSocketGroup, s.UnixSocketGroup, err)
		}
	}
	return &unixSocket{path: s.UnixSocket, listener: ln}, nil
}

func lookupGroup(name string) (int, error) {
	if gid, err := strconv.Atoi(name); err == nil {
		return gid, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(g.Gid)
}

// serve serves handler on the socket until ctx ends, then stops within
// grace: new connections are refused at once, open ones (watches) are
// closed after grace. It returns once the socket is closed and removed.
func (u *unixSocket) serve(ctx context.Context, handler http.Handler, grace time.Duration) {
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 30 * time.Second,
		ConnContext:       access.PeerConnContext,
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			srv.Close()
		}
	}()
	if err := srv.Serve(u.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		klog.ErrorS(err, "Serving the unix socket", "path", u.path)
	}
	<-stopped
	os.Remove(u.path)
}

// close closes a socket that was never served, which removes its file.
func (u *unixSocket) close() { u.listener.Close() }
