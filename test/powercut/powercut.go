//go:build linux

// Package powercut is a FUSE file system for tests that simulates what a
// power cut does to a disk: it passes everything through to a real
// directory, but file data that was not fsynced, and directory entries that
// were not synced through their directory, stay in a buffer of its own.
// A cut (CutWith, CutAtNext) drops that buffer, as the page cache is lost
// when the power goes, so what is left in the real directory is what a
// machine would find when it boots again. The same technique as LazyFS in etcd's robustness tests
// (https://github.com/etcd-io/etcd/tree/main/tests/robustness).
//
// The model is stricter than ext4's ordered journal, on purpose: a new or
// renamed entry survives only once its directory was fsynced (POSIX's rule,
// which a program may not rely on the journal to hide; JournaledEntries
// below is the journal), and file data only once the file was fsynced.
// Metadata other than entries and sizes (modes, times, preallocation) goes
// straight to the real directory.
//
// A cut takes one of five tears (see Tear), each a thing a cheap SD card
// or eMMC under ext4 or f2fs may do to what it had not made durable when
// the power goes:
//
//	LoseUnsynced      what was not fsynced is lost (LazyFS's "lose unsynced data")
//	TornWrite         the last unsynced write reaches the disk in part: a prefix
//	                  of it in whole 512-byte sectors, the device's atomic unit
//	ReorderedPair     of the last two unsynced writes on different pages, the
//	                  later reaches the disk and the earlier does not: the
//	                  device flushed its cache out of order
//	JournaledEntries  a prefix, in order, of the unsynced creates, renames and
//	                  removals reaches the disk, as a journal commits them; the
//	                  data does not, so a new file may come back empty
//	LostFsync         the last file fsync is undone: the device acknowledged a
//	                  flush it never made
//
// Everything else not synced is lost in each. Only LostFsync changes a byte
// that an fsync covered.
//
// A cut at a random instant mostly finds nothing to tear, since etcd
// fsyncs before it answers and is idle most of the time. CutAtNext waits
// for the moment a tear has material and cuts inside the file system call
// that gave it (a write, a directory change, an fsync), so that each tear
// acts on what the program has just done.
//
// The file system can also fail as storage does: Full answers ENOSPC to
// every write that needs space, ReadOnly answers EROFS to every change.
package powercut

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// pageSize is the unit of the buffer, as of the kernel's page cache.
const pageSize = 4096

// Fault is how the storage behaves.
type Fault int

const (
	// Healthy passes everything through.
	Healthy Fault = iota
	// Full refuses writes that need space with ENOSPC, as a full file
	// system does; reads, deletes and truncation still work.
	Full
	// ReadOnly refuses every change with EROFS, as a file system that the
	// kernel remounted read-only after an error does.
	ReadOnly
	// cut: the power is gone, nothing more reaches the disk.
	cut
)

// FS is a mounted power-cut file system.
type FS struct {
	// Dir is where it is mounted; Real is the directory behind it.
	Dir, Real string
	stash     string
	server    *fuse.Server

	mu      sync.Mutex
	fault   Fault
	files   map[uint64]*dirty // by inode number of the real file
	pending []entryOp         // directory changes not yet synced, in order
	stashed int
	// writes are the unsynced writes, in order, the last maxWrites of
	// them: what TornWrite and ReorderedPair tear.
	writes []unsynced
	// lastSync is what the last file fsync changed on the disk, for
	// LostFsync; nil once a later sync made it durable for good.
	lastSync *preImage
	// armed is the cut CutAtNext waits to fire.
	armed *arming
	// synced counts the fsyncs that reached the real directory (files and
	// directories), dropped the dirty pages the cut dropped.
	synced, dropped int
	// held are O_PATH descriptors of the regular files looked up or
	// created, by inode number, until the unmount: the kernel may open a
	// node whose name a rename gave to another file, or go-fuse gave to
	// a newer node, since it looked it up (node.orphaned), and opens that
	// inode then, as on a disk.
	held map[uint64]int
}

// dirty is a file's data that was written but not fsynced: the page cache
// of one file. The real file holds what was synced; of it, the bytes below
// valid are still the file's (a truncation hides the rest, which then
// reads as zeros).
type dirty struct {
	fd    int   // the real file, for pages not in the buffer
	size  int64 // the size the file has for its users
	valid int64
	pages map[int64][]byte // page index -> content, pageSize each
}

// newDirty starts the buffer of the real file fd (which it takes).
func newDirty(fd int) (*dirty, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return &dirty{fd: fd, size: st.Size, valid: st.Size, pages: map[int64][]byte{}}, nil
}

// read fills b from offset off of the file as its users see it, short of
// size; it does not keep what it reads.
func (d *dirty) read(b []byte, off int64) {
	for pos, end := off, off+int64(len(b)); pos < end; {
		p := pos / pageSize
		next := min((p+1)*pageSize, end)
		chunk := b[pos-off : next-off]
		if page := d.pages[p]; page != nil {
			copy(chunk, page[pos%pageSize:])
		} else {
			n, _ := syscall.Pread(d.fd, chunk, pos)
			// Past the real end, or past what of it is still the file's:
			// zeros.
			clear(chunk[max(0, min(int64(n), min(d.valid, d.size)-pos)):])
		}
		pos = next
	}
}

// page is page p of the buffer, loaded from the real file if needed.
func (d *dirty) page(p int64) []byte {
	if page := d.pages[p]; page != nil {
		return page
	}
	page := make([]byte, pageSize)
	d.read(page, p*pageSize)
	d.pages[p] = page
	return page
}

func (d *dirty) write(data []byte, off int64) {
	if off > d.size {
		d.truncate(off) // the gap reads as zeros
	}
	end := off + int64(len(data))
	for pos := off; pos < end; {
		p := pos / pageSize
		next := min((p+1)*pageSize, end)
		copy(d.page(p)[pos%pageSize:], data[pos-off:next-off])
		pos = next
	}
	d.size = max(d.size, end)
}

// truncate sets the size; the bytes between the old and a larger new size
// read as zeros.
func (d *dirty) truncate(size int64) {
	for p := range d.pages {
		if p*pageSize >= size {
			delete(d.pages, p)
		}
	}
	cut := min(size, d.size) // from here on, what was there is gone
	if page := d.pages[cut/pageSize]; page != nil {
		clear(page[cut%pageSize:])
	}
	d.valid = min(d.valid, cut)
	d.size = size
}

// sync writes the buffer to the real file and syncs it.
func (d *dirty) sync() error {
	var st syscall.Stat_t
	if err := syscall.Fstat(d.fd, &st); err != nil {
		return err
	}
	if d.valid < st.Size {
		if err := syscall.Ftruncate(d.fd, d.valid); err != nil {
			return err
		}
	}
	for p, page := range d.pages {
		if n := min(pageSize, d.size-p*pageSize); n > 0 {
			if _, err := syscall.Pwrite(d.fd, page[:n], p*pageSize); err != nil {
				return err
			}
		}
	}
	if err := syscall.Ftruncate(d.fd, d.size); err != nil {
		return err
	}
	return syscall.Fsync(d.fd)
}

// entryOp is a change of directory entries that a Cut undoes unless the
// directory it lands in was synced.
type entryOp struct {
	dir uint64 // inode of the directory whose fsync makes it durable
	// undo puts the entry back as it was.
	undo func() error
	// stash is what the change removed or replaced, kept until durable.
	stash string
	// removed is the inode of the directory the change removed, if any:
	// once the removal is durable, the changes made inside that directory
	// before it went can never be undone (their paths may name another
	// directory's entries by then).
	removed uint64
}

// Mount mounts a power-cut file system at dir over the real directory real
// (both must exist; real is created otherwise). stash, a sibling of real
// on the same file system, holds removed entries until they are durable.
func Mount(dir, real string) (*FS, error) {
	if err := os.MkdirAll(real, 0o755); err != nil {
		return nil, err
	}
	f := &FS{Dir: dir, Real: real, stash: filepath.Clean(real) + ".stash", files: map[uint64]*dirty{}, held: map[uint64]int{}}
	if err := os.RemoveAll(f.stash); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(f.stash, 0o700); err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(real, &st); err != nil {
		return nil, err
	}
	root := &fs.LoopbackRoot{Path: real, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, fs: f}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	zero := time.Duration(0)
	server, err := fs.Mount(dir, root.RootNode, &fs.Options{
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true,
			FsName:            real,
			Name:              "powercut",
			// The buffer lives in this process: the kernel must not keep
			// data of its own that this file system has not seen.
			DisableXAttrs: true,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("mounting the power-cut file system at %s: %w", dir, err)
	}
	f.server = server
	return f, nil
}

// SetFault makes the storage behave as fault says from now on.
func (f *FS) SetFault(fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fault != cut {
		f.fault = fault
	}
}

// Cut is CutWith(LoseUnsynced), or with tear CutWith(TornWrite): the
// first form of a cut, kept for the tests written against it.
func (f *FS) Cut(tear bool, rng *rand.Rand) Effect {
	if tear {
		return f.CutWith(TornWrite, rng)
	}
	return f.CutWith(LoseUnsynced, rng)
}

// Unmount unmounts the file system and removes what was stashed. Without
// a Cut it writes out what was not synced, as a clean unmount does; after
// one, what is in Real is what survived.
func (f *FS) Unmount() error {
	var err error
	for range 50 {
		if err = f.server.Unmount(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		// Something still holds the mount: detach it, so that no test
		// leaves a mount behind, and say so.
		syscall.Unmount(f.Dir, syscall.MNT_DETACH)
		return fmt.Errorf("unmounting %s: %w", f.Dir, err)
	}
	f.server.Wait()
	// An unmount writes the page cache out, as the kernel does; after a
	// Cut there is none left.
	f.mu.Lock()
	for _, d := range f.files {
		d.sync()
		syscall.Close(d.fd)
	}
	f.files, f.pending, f.writes = map[uint64]*dirty{}, nil, nil
	for _, fd := range f.held {
		syscall.Close(fd)
	}
	f.held = map[uint64]int{}
	f.keepSync(nil)
	f.mu.Unlock()
	return os.RemoveAll(f.stash)
}

// Stats says how many fsyncs reached the disk and how many dirty pages a
// cut dropped.
func (f *FS) Stats() (synced, dropped int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.synced, f.dropped
}

// refuse answers what the current fault makes of a change; needsSpace is
// true for changes that allocate.
func (f *FS) refuse(needsSpace bool) syscall.Errno {
	switch f.fault {
	case cut:
		return syscall.EIO
	case ReadOnly:
		return syscall.EROFS
	case Full:
		if needsSpace {
			return syscall.ENOSPC
		}
	}
	return 0
}

// moveToStash moves path out of the way, keeping it until the change that
// removed it is durable.
func (f *FS) moveToStash(path string) (string, error) {
	f.stashed++
	to := filepath.Join(f.stash, fmt.Sprint(f.stashed))
	return to, os.Rename(path, to)
}

// synced makes the pending changes of directory ino durable.
func (f *FS) syncedDir(ino uint64) {
	f.durable(ino)
	f.synced++
}

// durable drops the pending changes of directory ino, and those of the
// directories they removed.
func (f *FS) durable(ino uint64) {
	var gone []uint64
	kept := f.pending[:0]
	for _, op := range f.pending {
		if op.dir == ino {
			if op.stash != "" {
				os.RemoveAll(op.stash)
			}
			if op.removed != 0 {
				gone = append(gone, op.removed)
			}
			continue
		}
		kept = append(kept, op)
	}
	f.pending = kept
	for _, d := range gone {
		f.durable(d)
	}
}

// node is a file or directory of the mount.
type node struct {
	fs.LoopbackNode
	fs *FS
}

func (n *node) realPath() string {
	return filepath.Join(n.RootData.Path, n.Path(n.RootData.RootNode.EmbeddedInode()))
}

func (n *node) ino() uint64 { return n.StableAttr().Ino }

// orphaned reports whether n is no longer reachable from the root: a
// rename gave its name to another file, it was removed, or a newer lookup
// of its name made another node, after the kernel looked it up and before
// it opened what it found. On a disk the lookup and the open are one step.
func (n *node) orphaned() bool {
	in := n.EmbeddedInode()
	for !in.IsRoot() {
		if _, in = in.Parent(); in == nil {
			return true
		}
	}
	return false
}

// hold takes an O_PATH descriptor of the regular file at path, n's, unless
// one is held (FS.held). Under f.mu.
func (n *node) hold(path string) {
	if _, ok := n.fs.held[n.ino()]; ok {
		return
	}
	fd, err := syscall.Open(path, unix.O_PATH|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Ino != n.ino() {
		syscall.Close(fd)
		return
	}
	n.fs.held[n.ino()] = fd
}

// heldFD is the descriptor of n's inode if n is orphaned: open and stat
// go through it (/proc/self/fd/N opens an inode whose name is gone). ok is
// false when n is orphaned with none held, for which the caller answers
// ESTALE, on which the kernel looks the name up again (as on NFS). Under
// f.mu.
func (n *node) heldFD() (fd int, orphaned, ok bool) {
	if !n.orphaned() {
		return 0, false, true
	}
	fd, ok = n.fs.held[n.ino()]
	return fd, true, ok
}

// sizeOf overrides a real size with the buffered one.
func (f *FS) sizeOf(ino uint64, attr *fuse.Attr) {
	if d := f.files[ino]; d != nil {
		attr.Size = uint64(d.size)
		attr.Blocks = (attr.Size + 511) / 512
	}
}

var (
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeStatxer        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeStatfser       = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
)

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	ch, errno := n.LoopbackNode.Lookup(ctx, name, out)
	if errno == 0 {
		if c, ok := ch.Operations().(*node); ok {
			c.hold(filepath.Join(n.realPath(), name))
		}
		n.fs.sizeOf(ch.StableAttr().Ino, &out.Attr)
	}
	return ch, errno
}

func (n *node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	var st syscall.Stat_t
	var err error
	if h, ok := fh.(*handle); ok {
		err = syscall.Fstat(h.fd, &st)
	} else if fd, orphaned, ok := n.heldFD(); !ok {
		return syscall.ESTALE
	} else if orphaned {
		err = syscall.Fstat(fd, &st)
	} else {
		err = syscall.Lstat(n.realPath(), &st)
	}
	if err != nil {
		return fs.ToErrno(err)
	}
	out.FromStat(&st)
	n.fs.sizeOf(n.ino(), &out.Attr)
	return 0
}

// Statx is left to Getattr, which knows the buffered size.
func (n *node) Statx(context.Context, fs.FileHandle, uint32, uint32, *fuse.StatxOut) syscall.Errno {
	return syscall.ENOSYS
}

func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok {
		n.fs.mu.Lock()
		errno := n.fs.refuse(false)
		if errno == 0 {
			if d, err := n.fs.dirtyOf(n.ino(), n.realPath()); err == nil {
				d.truncate(int64(size))
				n.fs.forgetWrites(n.ino(), int64(size))
			} else {
				errno = fs.ToErrno(err)
			}
		}
		n.fs.mu.Unlock()
		if errno != 0 {
			return errno
		}
		in.Valid &^= fuse.FATTR_SIZE
	}
	if in.Valid&(fuse.FATTR_MODE|fuse.FATTR_UID|fuse.FATTR_GID|fuse.FATTR_ATIME|fuse.FATTR_MTIME) != 0 {
		n.fs.mu.Lock()
		errno := n.fs.refuse(false)
		n.fs.mu.Unlock()
		if errno != 0 {
			return errno
		}
		var lh fs.FileHandle
		if h, ok := fh.(*handle); ok {
			lh = fs.NewLoopbackFile(h.fd)
		}
		if errno := n.LoopbackNode.Setattr(ctx, lh, in, out); errno != 0 {
			return errno
		}
	}
	return n.Getattr(ctx, fh, out)
}

// dirtyOf is the buffer of a file, made on its first change. path opens
// the real file when it has none yet.
func (f *FS) dirtyOf(ino uint64, path string) (*dirty, error) {
	if d := f.files[ino]; d != nil {
		return d, nil
	}
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	d, err := newDirty(fd)
	if err != nil {
		return nil, err
	}
	f.files[ino] = d
	return d, nil
}

// drop forgets the buffer of ino.
func (f *FS) drop(ino uint64) {
	if d := f.files[ino]; d != nil {
		syscall.Close(d.fd)
		delete(f.files, ino)
	}
	f.forgetWrites(ino, 0)
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	trunc := flags&syscall.O_TRUNC != 0
	if writes := flags&(syscall.O_WRONLY|syscall.O_RDWR) != 0 || trunc; writes {
		if errno := n.fs.refuse(false); errno != 0 {
			return nil, 0, errno
		}
	}
	flags &^= syscall.O_TRUNC | syscall.O_APPEND
	p := n.realPath()
	if held, orphaned, ok := n.heldFD(); !ok {
		return nil, 0, syscall.ESTALE
	} else if orphaned {
		p = fmt.Sprintf("/proc/self/fd/%d", held)
	}
	fd, err := syscall.Open(p, int(flags|syscall.O_CLOEXEC)&^syscall.O_WRONLY|syscall.O_RDWR, 0)
	if err != nil {
		return nil, 0, fs.ToErrno(err)
	}
	if trunc {
		if d, err := n.fs.dirtyOf(n.ino(), n.realPath()); err == nil {
			d.truncate(0)
			n.fs.forgetWrites(n.ino(), 0)
		}
	}
	return &handle{fs: n.fs, fd: fd, ino: n.ino()}, 0, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	var fd int
	ch, errno := n.created(ctx, name, func() (*fs.Inode, syscall.Errno) {
		ch, lf, _, errno := n.LoopbackNode.Create(ctx, name, flags&^(syscall.O_TRUNC|syscall.O_APPEND), mode, out)
		if errno != 0 {
			return nil, errno
		}
		lf.(fs.FileReleaser).Release(ctx)
		var err error
		if fd, err = syscall.Open(filepath.Join(n.realPath(), name), syscall.O_RDWR|syscall.O_CLOEXEC, 0); err != nil {
			return nil, fs.ToErrno(err)
		}
		return ch, 0
	})
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return ch, &handle{fs: n.fs, fd: fd, ino: ch.StableAttr().Ino}, 0, 0
}

// created makes a new entry with make and records it, so that a Cut
// removes it unless its directory was synced. An entry that existed
// already is not new.
func (n *node) created(ctx context.Context, name string, make func() (*fs.Inode, syscall.Errno)) (*fs.Inode, syscall.Errno) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if errno := n.fs.refuse(true); errno != 0 {
		return nil, errno
	}
	p := filepath.Join(n.realPath(), name)
	_, existed := os.Lstat(p)
	ch, errno := make()
	if errno != 0 {
		return nil, errno
	}
	// A new file may have the number of a removed one: no buffer of that
	// one is its.
	n.fs.drop(ch.StableAttr().Ino)
	if c, ok := ch.Operations().(*node); ok {
		c.hold(p)
	}
	if existed != nil {
		n.fs.pending = append(n.fs.pending, entryOp{dir: n.ino(), undo: func() error { return os.RemoveAll(p) }})
		n.fs.happened(afterEntry)
	}
	return ch, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.created(ctx, name, func() (*fs.Inode, syscall.Errno) { return n.LoopbackNode.Mkdir(ctx, name, mode, out) })
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.created(ctx, name, func() (*fs.Inode, syscall.Errno) { return n.LoopbackNode.Mknod(ctx, name, mode, rdev, out) })
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.created(ctx, name, func() (*fs.Inode, syscall.Errno) { return n.LoopbackNode.Symlink(ctx, target, name, out) })
}

// Link is refused: nothing kubestore runs makes hard links, and the buffer
// is kept per inode but undone per entry.
func (n *node) Link(context.Context, fs.InodeEmbedder, string, *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

// removed moves an entry to the stash, from where a Cut puts it back.
func (n *node) removed(name string, dir bool) syscall.Errno {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if errno := n.fs.refuse(false); errno != 0 {
		return errno
	}
	p := filepath.Join(n.realPath(), name)
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return fs.ToErrno(err)
	}
	if isDir := st.Mode&syscall.S_IFMT == syscall.S_IFDIR; isDir != dir {
		if dir {
			return syscall.ENOTDIR
		}
		return syscall.EISDIR
	}
	if dir {
		if entries, err := os.ReadDir(p); err != nil {
			return fs.ToErrno(err)
		} else if len(entries) > 0 {
			return syscall.ENOTEMPTY
		}
	}
	op := entryOp{dir: n.ino()}
	if child := n.EmbeddedInode().GetChild(name); dir && child != nil {
		op.removed = child.StableAttr().Ino
	}
	to, err := n.fs.moveToStash(p)
	if err != nil {
		return fs.ToErrno(err)
	}
	op.stash, op.undo = to, func() error { return os.Rename(to, p) }
	n.fs.pending = append(n.fs.pending, op)
	n.fs.happened(afterEntry)
	return 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno { return n.removed(name, false) }
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno  { return n.removed(name, true) }

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	const renameNoReplace = 1
	to, ok := newParent.(*node)
	if !ok || flags&^renameNoReplace != 0 {
		return syscall.EINVAL
	}
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if errno := n.fs.refuse(false); errno != 0 {
		return errno
	}
	from, dest := filepath.Join(n.realPath(), name), filepath.Join(to.realPath(), newName)
	if _, err := os.Lstat(from); err != nil {
		return fs.ToErrno(err)
	}
	op := entryOp{dir: to.ino()}
	if _, err := os.Lstat(dest); err == nil {
		if flags&renameNoReplace != 0 {
			return syscall.EEXIST
		}
		if op.stash, err = n.fs.moveToStash(dest); err != nil {
			return fs.ToErrno(err)
		}
	}
	if err := os.Rename(from, dest); err != nil {
		if op.stash != "" {
			os.Rename(op.stash, dest)
		}
		return fs.ToErrno(err)
	}
	stash := op.stash
	op.undo = func() error {
		err := os.Rename(dest, from)
		if stash != "" {
			err = errors.Join(err, os.Rename(stash, dest))
		}
		return err
	}
	n.fs.pending = append(n.fs.pending, op)
	n.fs.happened(afterEntry)
	return 0
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	if errno := n.LoopbackNode.Statfs(ctx, out); errno != 0 {
		return errno
	}
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if n.fs.fault == Full {
		out.Bfree, out.Bavail = 0, 0
	}
	return 0
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	h, fuseFlags, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &dirHandle{inner: h, node: n}, fuseFlags, 0
}

// dirHandle is an open directory: fsync makes its pending entries durable.
type dirHandle struct {
	inner fs.FileHandle
	node  *node
}

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.inner.(fs.FileReaddirenter).Readdirent(ctx)
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.inner.(fs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.inner.(fs.FileReleasedirer).Releasedir(ctx, flags)
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	f := d.node.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fault == cut {
		return syscall.EIO
	}
	if errno := d.inner.(fs.FileFsyncdirer).Fsyncdir(ctx, flags); errno != 0 {
		return errno
	}
	f.syncedDir(d.node.ino())
	// Its flush made the last file fsync durable too.
	f.keepSync(nil)
	return 0
}

// handle is an open file. It holds the real file open read-write, whatever
// the caller asked for: the kernel has checked the access already, and a
// sync must be able to write the buffer.
type handle struct {
	fs  *FS
	fd  int
	ino uint64
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
)

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	d := h.fs.files[h.ino]
	if d == nil {
		n, err := syscall.Pread(h.fd, dest, off)
		if err != nil {
			return nil, fs.ToErrno(err)
		}
		return fuse.ReadResultData(dest[:n]), 0
	}
	end := min(off+int64(len(dest)), d.size)
	if off >= end {
		return fuse.ReadResultData(nil), 0
	}
	d.read(dest[:end-off], off)
	return fuse.ReadResultData(dest[:end-off]), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if errno := h.fs.refuse(true); errno != 0 {
		return 0, errno
	}
	d := h.fs.files[h.ino]
	if d == nil {
		fd, err := syscall.Dup(h.fd)
		if err != nil {
			return 0, fs.ToErrno(err)
		}
		if d, err = newDirty(fd); err != nil {
			return 0, fs.ToErrno(err)
		}
		h.fs.files[h.ino] = d
	}
	d.write(data, off)
	if len(data) > 0 {
		h.fs.wrote(unsynced{ino: h.ino, off: off, end: off + int64(len(data))})
		h.fs.happened(afterWrite)
	}
	return uint32(len(data)), 0
}

// Fsync writes the file's buffer to the real file and syncs it, keeping
// what it overwrote for LostFsync.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if h.fs.fault == cut {
		return syscall.EIO
	}
	if d := h.fs.files[h.ino]; d != nil {
		if errno := h.fs.refuse(false); errno != 0 {
			return errno
		}
		pre := d.preImage()
		if err := d.sync(); err != nil {
			pre.close()
			return fs.ToErrno(err)
		}
		h.fs.drop(h.ino)
		h.fs.keepSync(pre)
	} else if err := syscall.Fsync(h.fd); err != nil {
		return fs.ToErrno(err)
	} else {
		// Nothing of this file to write, but the flush made the last
		// fsync durable.
		h.fs.keepSync(nil)
	}
	h.fs.synced++
	h.fs.happened(afterFsync)
	return 0
}

// Allocate goes straight to the real file: preallocation is metadata.
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if errno := h.fs.refuse(true); errno != 0 {
		return errno
	}
	if err := syscall.Fallocate(h.fd, mode, int64(off), int64(size)); err != nil {
		return fs.ToErrno(err)
	}
	if d := h.fs.files[h.ino]; d != nil && mode&0x01 == 0 { // not FALLOC_FL_KEEP_SIZE
		if end := int64(off + size); end > d.size {
			d.truncate(end)
		}
	}
	return 0
}

func (h *handle) Flush(ctx context.Context) syscall.Errno { return 0 }

func (h *handle) Release(ctx context.Context) syscall.Errno {
	return fs.ToErrno(syscall.Close(h.fd))
}

// Available says why this machine cannot mount the file system, if it
// cannot: it needs /dev/fuse and root, to mount without fusermount.
func Available() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("no FUSE device for the power-cut file system: %w", err)
	}
	if os.Geteuid() != 0 {
		return errors.New("mounting the power-cut file system directly needs root")
	}
	return nil
}

// Skip skips a test that needs what this machine lacks (this file system,
// or root and loop devices), except in CI (CI set), where such a test that
// cannot run is a failure: the machine was meant to have it.
func Skip(t testing.TB, why error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("cannot run here: %v", why)
	}
	t.Skipf("cannot run here: %v", why)
}
