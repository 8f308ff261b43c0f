//go:build linux

package powercut

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"
)

// Tear is what a power cut does to what the disk had not made durable.
// Each is a thing a cheap SD card or eMMC under ext4 or f2fs may do; none
// changes a byte an fsync covered, except LostFsync, whose device lies
// about its flushes.
type Tear int

const (
	// LoseUnsynced: everything not fsynced is lost, the disk holds what
	// the syncs made durable and nothing else.
	LoseUnsynced Tear = iota
	// TornWrite: the last unsynced write reaches the disk in part, a
	// prefix of it in whole 512-byte sectors (a device's atomic unit, not
	// the kernel's page); the rest of the unsynced data is lost.
	TornWrite
	// ReorderedPair: of the last two unsynced writes that touched
	// different pages, the later reaches the disk and the earlier does
	// not, as from a device that reorders its cache flush; the rest is
	// lost.
	ReorderedPair
	// JournaledEntries: a prefix, in order, of the unsynced directory
	// changes (creates, renames, removals) reaches the disk, as a
	// journaled file system commits them in order; unsynced file data is
	// lost, so a new file may survive empty.
	JournaledEntries
	// LostFsync: the device drops a flush it acknowledged. What the last
	// file fsync made durable reverts to what it was before, and
	// everything unsynced is lost. A sync after it, of a directory too,
	// flushed the device again and leaves nothing to revert.
	LostFsync
)

func (t Tear) String() string {
	switch t {
	case LoseUnsynced:
		return "lose unsynced"
	case TornWrite:
		return "torn write"
	case ReorderedPair:
		return "reordered pair"
	case JournaledEntries:
		return "journaled entries"
	case LostFsync:
		return "lost fsync"
	}
	return fmt.Sprintf("Tear(%d)", int(t))
}

// sectorSize is what a device writes whole or not at all.
const sectorSize = 512

// Effect is what a cut did, for a test's log and tally.
type Effect struct {
	Tear Tear
	// Acted says the tear had material; without, the cut only lost what
	// was unsynced, as LoseUnsynced does. For LoseUnsynced itself: there
	// was something unsynced to lose.
	Acted bool
	// Dropped counts the dirty pages the cut threw away, including those
	// a torn or reordered write reached the disk from.
	Dropped int
	// Sectors is how many sectors the torn write spans, SectorsKept how
	// many of them reached the disk (TornWrite).
	Sectors, SectorsKept int
	// EntriesPending counts the directory changes not synced at the cut,
	// EntriesKept those of them that reached the disk (JournaledEntries).
	EntriesKept, EntriesPending int
	// PagesReverted counts the pages the lost fsync had written or cut
	// off (LostFsync).
	PagesReverted int
}

// String is one short line, as "torn write: 3 of 8 sectors kept, 41 dirty
// pages and 2 directory changes dropped".
func (e Effect) String() string {
	var what string
	switch {
	case !e.Acted && e.Tear == LoseUnsynced:
		what = "nothing unsynced"
	case !e.Acted:
		what = "nothing to tear"
	case e.Tear == TornWrite:
		what = fmt.Sprintf("%d of %d sectors kept", e.SectorsKept, e.Sectors)
	case e.Tear == ReorderedPair:
		what = "the later of two writes kept, the earlier lost"
	case e.Tear == JournaledEntries:
		what = fmt.Sprintf("%d of %d directory changes kept", e.EntriesKept, e.EntriesPending)
	case e.Tear == LostFsync:
		what = fmt.Sprintf("%d synced pages reverted", e.PagesReverted)
	}
	lost := fmt.Sprintf("%d dirty pages and %d directory changes dropped", e.Dropped, e.EntriesPending-e.EntriesKept)
	if what == "" {
		return fmt.Sprintf("%v: %s", e.Tear, lost)
	}
	return fmt.Sprintf("%v: %s, %s", e.Tear, what, lost)
}

// CutWith is the power going now, with tear t: from now on every change
// fails and nothing reaches the real directory; what was not synced is
// lost, but for what t lets reach the disk, and for LostFsync the last
// fsync is taken back. rng chooses how much a TornWrite or a
// JournaledEntries keeps. Unmount after the processes using the mount are
// gone.
func (f *FS) CutWith(t Tear, rng *rand.Rand) Effect {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cut(t, rng)
}

// CutAtNext arms a cut with tear t and returns once it has happened. It
// fires inside the file system's own call, at the first moment within
// wait when t has material: after an unsynced write (LoseUnsynced,
// TornWrite), after a write that makes a pair with an earlier one on other
// pages (ReorderedPair), after a directory change (JournaledEntries),
// after a file fsync that wrote data, which still returns success to the
// program (LostFsync). Material there before the call does not count: the
// cut lands right after the program acted, which is where a tear hurts.
// Without such a moment the power goes at the end of wait and tears
// nothing (Effect.Acted false). Only one CutAtNext may wait at a time.
func (f *FS) CutAtNext(t Tear, rng *rand.Rand, wait time.Duration) Effect {
	a := &arming{tear: t, rng: rng, done: make(chan Effect, 1)}
	f.mu.Lock()
	if f.fault == cut {
		f.mu.Unlock()
		return Effect{Tear: t}
	}
	if f.armed != nil {
		f.mu.Unlock()
		panic("powercut: CutAtNext called while another waits")
	}
	f.armed = a
	f.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case e := <-a.done:
		return e
	case <-timer.C:
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.armed != a {
		return <-a.done // it fired as the wait ended
	}
	f.armed = nil
	e := f.cut(LoseUnsynced, rng)
	e.Tear, e.Acted = t, false
	return e
}

// arming is a cut waiting for its moment.
type arming struct {
	tear Tear
	rng  *rand.Rand
	done chan Effect // buffered: the cut never waits for its caller
}

// event is a kind of call after which an armed cut may fire.
type event int

const (
	afterWrite event = iota
	afterEntry
	afterFsync
)

func (t Tear) waitsFor() event {
	switch t {
	case JournaledEntries:
		return afterEntry
	case LostFsync:
		return afterFsync
	}
	return afterWrite
}

// happened fires the armed cut if ev is its moment: the kind of call its
// tear waits for, after which the tear has material. f.mu is held.
func (f *FS) happened(ev event) {
	a := f.armed
	if a == nil || a.tear.waitsFor() != ev || !f.material(a.tear) {
		return
	}
	f.armed = nil
	a.done <- f.cut(a.tear, a.rng)
}

// material says whether tear t would change anything now.
func (f *FS) material(t Tear) bool {
	switch t {
	case LoseUnsynced:
		return len(f.files) > 0 || len(f.pending) > 0
	case TornWrite:
		return len(f.writes) > 0
	case ReorderedPair:
		_, ok := f.reorderedPair()
		return ok
	case JournaledEntries:
		return len(f.pending) > 0
	case LostFsync:
		return f.lastSync != nil
	}
	return false
}

// cut is the power going, with tear t where it has material. f.mu is held.
func (f *FS) cut(t Tear, rng *rand.Rand) Effect {
	e := Effect{Tear: t, Acted: f.material(t), EntriesPending: len(f.pending)}
	f.fault = cut
	if e.Acted {
		switch t {
		case TornWrite:
			w := f.writes[len(f.writes)-1]
			first, last := w.off/sectorSize, (w.end-1)/sectorSize
			e.Sectors = int(last - first + 1)
			// At least one sector, and short of all of them when there
			// are two: keeping none is LoseUnsynced's outcome.
			e.SectorsKept = 1
			if e.Sectors > 1 {
				e.SectorsKept += rng.IntN(e.Sectors - 1)
			}
			f.reach(w.ino, w.off, min(w.end, (first+int64(e.SectorsKept))*sectorSize))
		case ReorderedPair:
			later, _ := f.reorderedPair()
			f.reach(later.ino, later.off, later.end)
		case JournaledEntries:
			// At least the first: keeping none is LoseUnsynced's outcome.
			e.EntriesKept = 1 + rng.IntN(len(f.pending))
		case LostFsync:
			f.lastSync.revert()
			e.PagesReverted = f.lastSync.pages
		}
	}
	for _, d := range f.files {
		e.Dropped += len(d.pages)
		syscall.Close(d.fd)
	}
	f.files, f.writes = map[uint64]*dirty{}, nil
	for i := len(f.pending) - 1; i >= e.EntriesKept; i-- {
		f.pending[i].undo()
	}
	f.pending = nil
	f.keepSync(nil)
	f.dropped += e.Dropped
	if a := f.armed; a != nil {
		// Another cut came first: the armed one has nothing left to do.
		f.armed = nil
		a.done <- Effect{Tear: a.tear}
	}
	return e
}

// reach writes bytes [from, to) of a file's buffer to the real file: a part
// of the page cache that got to the disk before the power went.
func (f *FS) reach(ino uint64, from, to int64) {
	d := f.files[ino]
	if d == nil || to <= from {
		return
	}
	b := make([]byte, to-from)
	d.read(b, from)
	syscall.Pwrite(d.fd, b, from)
}

// maxWrites bounds the unsynced writes remembered for ReorderedPair, which
// looks back past those that share a page with the last.
const maxWrites = 1024

// unsynced is one unsynced write, as the program made it.
type unsynced struct {
	ino      uint64
	off, end int64
}

func (w unsynced) sharesPage(o unsynced) bool {
	return w.ino == o.ino && w.off/pageSize <= (o.end-1)/pageSize && o.off/pageSize <= (w.end-1)/pageSize
}

// wrote remembers an unsynced write.
func (f *FS) wrote(w unsynced) {
	if len(f.writes) == maxWrites {
		f.writes = f.writes[1:]
	}
	f.writes = append(f.writes, w)
}

// forgetWrites forgets the writes of ino that reach past size: they were
// synced (size 0) or truncated, and what is left of them is no single
// write any more.
func (f *FS) forgetWrites(ino uint64, size int64) {
	kept := f.writes[:0]
	for _, w := range f.writes {
		if w.ino != ino || w.end <= size {
			kept = append(kept, w)
		}
	}
	f.writes = kept
}

// reorderedPair finds the last unsynced write and the latest before it
// that shares no page with it; ok is false when there is none.
func (f *FS) reorderedPair() (later unsynced, ok bool) {
	if len(f.writes) < 2 {
		return unsynced{}, false
	}
	later = f.writes[len(f.writes)-1]
	for i := len(f.writes) - 2; i >= 0; i-- {
		if !f.writes[i].sharesPage(later) {
			return later, true
		}
	}
	return unsynced{}, false
}

// preImage is what a file fsync changed on the disk, kept until a later
// sync so that LostFsync can put it back.
type preImage struct {
	fd      int   // a duplicate: the buffer's own is closed after the sync
	size    int64 // the size of the real file before the sync
	extents []extent
	pages   int // pages the sync wrote or cut off
}

// extent is content of the real file at off.
type extent struct {
	off  int64
	data []byte
}

// maxPreImage bounds what a pre-image keeps: a sync that overwrites or
// cuts off more keeps none, and LostFsync has nothing to revert after it.
// etcd's syncs write a few pages; a truncated 64 MiB WAL segment would
// cost a copy of it on every such sync.
const maxPreImage = 16 << 20

// preImage reads what d.sync is about to change on the disk, or returns
// nil when that is nothing, too much, or unreadable.
func (d *dirty) preImage() *preImage {
	var st syscall.Stat_t
	if err := syscall.Fstat(d.fd, &st); err != nil {
		return nil
	}
	old := st.Size
	pages := map[int64]bool{}
	var spans [][2]int64 // [from, to) of the old content the sync changes
	for p := range d.pages {
		pages[p] = true
		if from := p * pageSize; from < old {
			spans = append(spans, [2]int64{from, min(from+pageSize, old)})
		}
	}
	if d.valid < old { // sync cuts the real file there first
		spans = append(spans, [2]int64{d.valid, old})
	}
	total := int64(0)
	for _, s := range spans {
		total += s[1] - s[0]
	}
	if total > maxPreImage || (len(spans) == 0 && len(pages) == 0 && d.size == old) {
		return nil
	}
	for p := d.valid / pageSize; p*pageSize < old; p++ {
		pages[p] = true
	}
	fd, err := syscall.Dup(d.fd)
	if err != nil {
		return nil
	}
	pre := &preImage{fd: fd, size: old, pages: len(pages)}
	for _, s := range spans {
		b := make([]byte, s[1]-s[0])
		if n, err := syscall.Pread(d.fd, b, s[0]); err != nil || n != len(b) {
			pre.close()
			return nil
		}
		pre.extents = append(pre.extents, extent{off: s[0], data: b})
	}
	return pre
}

// revert puts the real file back as it was before the sync.
func (p *preImage) revert() {
	for _, e := range p.extents {
		syscall.Pwrite(p.fd, e.data, e.off)
	}
	syscall.Ftruncate(p.fd, p.size)
}

func (p *preImage) close() {
	if p != nil {
		syscall.Close(p.fd)
	}
}

// keepSync makes pre the last file fsync's pre-image; nil says a later
// flush made the last fsync durable for good.
func (f *FS) keepSync(pre *preImage) {
	f.lastSync.close()
	f.lastSync = pre
}
