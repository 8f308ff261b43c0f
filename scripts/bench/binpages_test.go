package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// A program with its symbols holds its code resident: .text has resident
// pages, and the standard library's, the runtime metadata's and its own
// module's.
func TestBinaryPages(t *testing.T) {
	dir := t.TempDir()
	src := "package main\n\nimport \"time\"\n\nfunc main() { for { time.Sleep(time.Second) } }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/sleeper\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sleeper")
	build := exec.Command("go", "build", "-ldflags=-w", "-o", bin, ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }() //nolint:errcheck
	time.Sleep(200 * time.Millisecond)
	p, err := readBinaryPages(cmd.Process.Pid, bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(p)
	sections := map[string]PageShare{}
	for _, s := range p.Sections {
		sections[s.Name] = s
		if s.Resident < 0 || s.Resident > s.Size {
			t.Errorf("section %s: %d resident of %d", s.Name, s.Resident, s.Size)
		}
	}
	if s := sections[".text"]; s.Resident <= 0 {
		t.Errorf(".text: %+v, want resident pages", s)
	}
	modules := map[string]int64{}
	for _, m := range p.Modules {
		modules[m.Name] = m.Resident
	}
	for _, m := range []string{"std", "runtime metadata", "example.com/sleeper"} {
		if modules[m] <= 0 {
			t.Errorf("module %s: %d resident, want some; modules %v", m, modules[m], p.Modules)
		}
	}
}

func TestModuleOf(t *testing.T) {
	modules := []string{"github.com/kubestore/kubestore", "k8s.io/apimachinery", "k8s.io/api"}
	for symbol, want := range map[string]string{
		"k8s.io/api/core/v1.(*Pod).Unmarshal":                   "k8s.io/api",
		"k8s.io/apimachinery/pkg/runtime.(*Scheme).New":         "k8s.io/apimachinery",
		"github.com/kubestore/kubestore/cacher.withSharedParts": "github.com/kubestore/kubestore",
		"main.main":        "github.com/kubestore/kubestore",
		"runtime.mallocgc": "std",
		"vendor/golang.org/x/net/http2/hpack.init":                   "std",
		"type:*k8s.io/api/core/v1.Pod":                               "runtime metadata",
		"go:string.*":                                                "runtime metadata",
		"slices.Sort[go.shape.[]k8s.io/api/core/v1.Container,uint8]": "std",
		"example.com/unknown.F":                                      "other",
	} {
		if got := moduleOf(symbol, modules); got != want {
			t.Errorf("moduleOf(%q) = %q, want %q", symbol, got, want)
		}
	}
}
