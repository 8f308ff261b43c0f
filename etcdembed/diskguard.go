package etcdembed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
)

// diskCheckInterval is how often the guard looks at the file system: a
// statfs and a read of /proc/self/mountinfo, no disk I/O.
const diskCheckInterval = time.Second

// ErrDiskRefused wraps every write the DiskGuard refuses.
var ErrDiskRefused = errors.New("etcd write refused")

// DiskGuard keeps the embedded member's writes off a file system that
// cannot take them. etcd ends the process when a WAL or database write
// fails (it cannot know what reached the disk), and that would stop reads
// too; a full data partition would then fail every restart as well. The
// guard looks at the file system every second and, while its free space is
// below --etcd-reserved-disk-bytes or it is read-only (remounted, or turned
// read-only by the kernel after an error), refuses kubestore's own etcd
// writes with ErrDiskRefused. Reads, watches and deletes' reads go on;
// writes resume by themselves once space or write access returns.
//
// What it cannot stop: a write already under way when the file system
// turns read-only between two looks, and etcd's own writes (a lease
// expiring). Those end the process as before (docs/RELIABILITY.md).
type DiskGuard struct {
	dir     string
	reserve int64
	lg      *zap.Logger
	refused atomic.Pointer[error]
}

func newDiskGuard(dir datadir.Dir, reserve int64, lg *zap.Logger) *DiskGuard {
	return &DiskGuard{dir: dir.Etcd(), reserve: reserve, lg: lg}
}

// Err is why writes are refused now, or nil.
func (g *DiskGuard) Err() error {
	if e := g.refused.Load(); e != nil {
		return *e
	}
	return nil
}

// run looks at the file system until stop is closed; the returned channel
// is closed when it has stopped.
func (g *DiskGuard) run(stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	g.update()
	go func() {
		defer close(done)
		t := time.NewTicker(diskCheckInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				g.update()
			}
		}
	}()
	return done
}

// update looks once and logs each change of state.
func (g *DiskGuard) update() {
	err := g.check()
	was := g.Err()
	switch {
	case err != nil && was == nil:
		g.lg.Warn("refusing writes", zap.Error(err))
	case err == nil && was != nil:
		g.lg.Warn("accepting writes again", zap.String("data-dir", g.dir))
	}
	if err == nil {
		g.refused.Store(nil)
	} else {
		g.refused.Store(&err)
	}
}

func (g *DiskGuard) check() error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(g.dir, &st); err != nil {
		return fmt.Errorf("%w: the data directory's file system cannot be read (%s): %v", ErrDiskRefused, g.dir, err)
	}
	if st.Flags&0x1 != 0 || mountReadOnly(g.dir) { // ST_RDONLY
		return fmt.Errorf("%w: the file system of %s is read-only; writes resume once it is writable again (after an error the kernel made it read-only: check it with fsck, then remount it and restart kubestore)", ErrDiskRefused, g.dir)
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free < g.reserve {
		return fmt.Errorf("%w: the file system of %s has %s free, below --%s %s; writes resume once space is freed on it",
			ErrDiskRefused, g.dir, config.ByteSize(free), config.FlagEtcdReservedDiskBytes, config.ByteSize(g.reserve))
	}
	return nil
}

// mountReadOnly reports whether the mount holding path is read-only by its
// mount or super-block options in /proc/self/mountinfo. Linux 6.x marks a
// file system the kernel stopped writing after an error "emergency_ro"
// there, which statfs does not show.
func mountReadOnly(path string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	best, ro := -1, false
	for _, line := range strings.Split(string(data), "\n") {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		fields := strings.Fields(line)
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 6 || sep < 0 || sep+3 >= len(fields) {
			continue
		}
		mnt := unescapeMount(fields[4])
		if mnt != "/" && path != mnt && !strings.HasPrefix(path, mnt+"/") {
			continue
		}
		if len(mnt) <= best {
			continue
		}
		best = len(mnt)
		ro = false
		for _, opts := range []string{fields[5], fields[sep+3]} {
			for _, o := range strings.Split(opts, ",") {
				if o == "ro" || o == "emergency_ro" {
					ro = true
				}
			}
		}
	}
	return ro
}

// unescapeMount undoes mountinfo's octal escapes (a space is \040).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// UnaryClientInterceptor refuses the etcd requests that write while the
// guard refuses writes; reads pass.
func (g *DiskGuard) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if err := g.Err(); err != nil && writes(method, req) {
			return err
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// writes reports whether an etcd request would be written to the WAL.
func writes(method string, req any) bool {
	switch method {
	case "/etcdserverpb.KV/Put", "/etcdserverpb.KV/DeleteRange", "/etcdserverpb.KV/Compact",
		"/etcdserverpb.Lease/LeaseGrant", "/etcdserverpb.Lease/LeaseRevoke":
		return true
	case "/etcdserverpb.KV/Txn":
		t, ok := req.(*pb.TxnRequest)
		return !ok || txnWrites(t)
	}
	return false
}

func txnWrites(t *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{t.Success, t.Failure} {
		for _, op := range ops {
			switch r := op.Request.(type) {
			case *pb.RequestOp_RequestPut, *pb.RequestOp_RequestDeleteRange:
				return true
			case *pb.RequestOp_RequestTxn:
				if txnWrites(r.RequestTxn) {
					return true
				}
			}
		}
	}
	return false
}
