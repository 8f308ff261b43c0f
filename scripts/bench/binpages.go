package main

import (
	"bufio"
	"debug/buildinfo"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
)

// BinaryPages is what of its executable a server holds resident (mapped
// in its page tables, so counted in its RSS), by ELF section and, given
// the symbols of the same build (-symbols-bin), by module: which code and
// data a running server touches (issue 39).
type BinaryPages struct {
	Sections []PageShare `json:"sections"`
	Modules  []PageShare `json:"modules,omitempty"`
}

// PageShare is the resident bytes of one section or module, of its size.
type PageShare struct {
	Name     string `json:"name"`
	Resident int64  `json:"resident"`
	Size     int64  `json:"size"`
}

// String gives the sections, and the modules holding the most, in MiB.
func (p BinaryPages) String() string {
	var b strings.Builder
	for i, s := range p.Sections {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.1f of %.1f", s.Name, float64(s.Resident)/(1<<20), float64(s.Size)/(1<<20))
	}
	if len(p.Modules) > 0 {
		b.WriteString("; by module:")
		for i, m := range p.Modules {
			if i == binaryPagesModules {
				break
			}
			fmt.Fprintf(&b, " %s %.1f,", m.Name, float64(m.Resident)/(1<<20))
		}
	}
	return strings.TrimSuffix(b.String(), ",") + " MiB"
}

// binaryPagesModules is how many modules String names.
const binaryPagesModules = 8

// binaryPagesSmallSection is the size of the sections left out (notes,
// build info, module data): a few pages at most.
const binaryPagesSmallSection = 64 << 10

const pageSize = 4096

// readBinaryPages reads which pages of pid's executable are present in its
// page tables (/proc/PID/pagemap), and attributes each to the sections it
// covers and, with symbolsBin (the same build, not stripped: its loaded
// sections are at the same addresses), to the modules of the symbols in it.
func readBinaryPages(pid int, symbolsBin string) (BinaryPages, error) {
	exePath := fmt.Sprintf("/proc/%d/exe", pid)
	exe, err := elf.Open(exePath)
	if err != nil {
		return BinaryPages{}, err
	}
	defer exe.Close()
	present, err := presentExePages(pid)
	if err != nil {
		return BinaryPages{}, err
	}
	var p BinaryPages
	for _, s := range exe.Sections {
		// .bss and .noptrbss are anonymous memory, not the file's.
		if s.Flags&elf.SHF_ALLOC == 0 || s.Type == elf.SHT_NOBITS || s.Size < binaryPagesSmallSection {
			continue
		}
		p.Sections = append(p.Sections, PageShare{Name: s.Name, Size: int64(s.Size), Resident: residentIn(present, s.Addr, s.Addr+s.Size)})
	}
	if symbolsBin == "" {
		return p, nil
	}
	p.Modules, err = residentByModule(present, symbolsBin, exe)
	return p, err
}

// sameLayout checks that sym's loaded sections are exe's, at the same
// addresses and of the same sizes: the same build, one with its symbols.
func sameLayout(exe, sym *elf.File) error {
	loaded := func(f *elf.File) map[string][2]uint64 {
		m := map[string][2]uint64{}
		for _, s := range f.Sections {
			if s.Flags&elf.SHF_ALLOC != 0 {
				m[s.Name] = [2]uint64{s.Addr, s.Size}
			}
		}
		return m
	}
	a, b := loaded(exe), loaded(sym)
	for name, at := range a {
		if b[name] != at {
			return fmt.Errorf("section %s at %#x+%d in the server's binary, at %#x+%d in the symbols' (not the same build)", name, at[0], at[1], b[name][0], b[name][1])
		}
	}
	return nil
}

// presentExePages are the page addresses of pid's executable mappings
// that are present in its page tables.
func presentExePages(pid int) (map[uint64]bool, error) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return nil, err
	}
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	defer maps.Close()
	pagemap, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, err
	}
	defer pagemap.Close()
	present := map[uint64]bool{}
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe {
			continue
		}
		var start, end uint64
		if _, err := fmt.Sscanf(fields[0], "%x-%x", &start, &end); err != nil {
			return nil, fmt.Errorf("reading /proc/%d/maps line %q: %w", pid, sc.Text(), err)
		}
		// One 64-bit entry per page; bit 63 is "present".
		entries := make([]byte, (end-start)/pageSize*8)
		if _, err := pagemap.ReadAt(entries, int64(start/pageSize*8)); err != nil {
			return nil, fmt.Errorf("reading /proc/%d/pagemap: %w", pid, err)
		}
		for i := 0; i < len(entries); i += 8 {
			if binary.LittleEndian.Uint64(entries[i:])&(1<<63) != 0 {
				present[start+uint64(i/8)*pageSize] = true
			}
		}
	}
	return present, sc.Err()
}

// residentIn is the bytes of [from, to) on present pages.
func residentIn(present map[uint64]bool, from, to uint64) int64 {
	var n int64
	for page := from &^ (pageSize - 1); page < to; page += pageSize {
		if present[page] {
			n += int64(min(to, page+pageSize) - max(from, page))
		}
	}
	return n
}

// residentByModule attributes the present pages to the modules of the
// symbols on them, by the bytes each symbol has there: the module of a
// package from the build's own module list, the standard library as
// "std", the compiler's type and function metadata (type:*, go:*) as
// "runtime metadata". Bytes no symbol names (the function tables,
// strings) are not counted here: the sections give them.
func residentByModule(present map[uint64]bool, symbolsBin string, exe *elf.File) ([]PageShare, error) {
	f, err := elf.Open(symbolsBin)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := sameLayout(exe, f); err != nil {
		return nil, fmt.Errorf("%s: %w", symbolsBin, err)
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("reading the symbols of %s: %w", symbolsBin, err)
	}
	info, err := buildinfo.ReadFile(symbolsBin)
	if err != nil {
		return nil, err
	}
	var modules []string
	for _, d := range info.Deps {
		modules = append(modules, d.Path)
	}
	// Longest first, so that a module nested in another's path wins;
	// the main module first of all, as package main is its.
	sort.Slice(modules, func(i, j int) bool { return len(modules[i]) > len(modules[j]) })
	modules = append([]string{info.Main.Path}, modules...)
	by := map[string]*PageShare{}
	for _, s := range syms {
		if s.Size == 0 || s.Section == elf.SHN_UNDEF || int(s.Section) >= len(f.Sections) ||
			f.Sections[s.Section].Type == elf.SHT_NOBITS {
			continue
		}
		name := moduleOf(s.Name, modules)
		m := by[name]
		if m == nil {
			m = &PageShare{Name: name}
			by[name] = m
		}
		m.Size += int64(s.Size)
		m.Resident += residentIn(present, s.Value, s.Value+s.Size)
	}
	var out []PageShare
	for _, m := range by {
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b PageShare) int {
		if a.Resident != b.Resident {
			return int(b.Resident - a.Resident)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// moduleOf is the module of a Go symbol: k8s.io/api for
// "k8s.io/api/core/v1.(*Pod).Unmarshal". modules[0] is the main module,
// whose package main is named "main".
func moduleOf(symbol string, modules []string) string {
	if strings.HasPrefix(symbol, "type:") || strings.HasPrefix(symbol, "go:") {
		return "runtime metadata"
	}
	// A generic instance's type arguments hold paths of their own.
	if i := strings.IndexByte(symbol, '['); i >= 0 {
		symbol = symbol[:i]
	}
	pkg := symbol
	slash := strings.LastIndexByte(pkg, '/')
	if dot := strings.IndexByte(pkg[slash+1:], '.'); dot >= 0 {
		pkg = pkg[:slash+1+dot]
	}
	if pkg == "main" {
		return modules[0]
	}
	for _, m := range modules {
		if pkg == m || strings.HasPrefix(pkg, m+"/") {
			return m
		}
	}
	if first, _, _ := strings.Cut(pkg, "/"); !strings.Contains(first, ".") {
		return "std"
	}
	return "other"
}
