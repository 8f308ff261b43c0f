package memory

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroup is the memory cgroup that limits the process, v2 or v1.
type cgroup struct {
	dir   string // its directory, under the root it was found from
	shown string // its directory as the process sees it, for messages
	v2    bool
	limit int64
}

// limitingCgroup finds the memory cgroup that limits the process, at its
// path in /proc/self/cgroup or, inside a container whose cgroup namespace
// hides that path, at the mount's root; nil when no cgroup sets a limit.
// root is "/" except in tests.
func limitingCgroup(root string) *cgroup {
	b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// v2: "0::/path"; v1: "4:memory:/path".
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dirs []string
		var v2 bool
		switch {
		case parts[0] == "0" && parts[1] == "":
			dirs, v2 = []string{"sys/fs/cgroup" + parts[2], "sys/fs/cgroup"}, true
		case strings.Contains(","+parts[1]+",", ",memory,"):
			dirs = []string{"sys/fs/cgroup/memory" + parts[2], "sys/fs/cgroup/memory"}
		default:
			continue
		}
		for _, d := range dirs {
			c := &cgroup{dir: filepath.Join(root, d), shown: "/" + filepath.ToSlash(filepath.Clean(d)), v2: v2}
			v, err := c.read(c.limitFile())
			if err != nil {
				continue
			}
			// v2 says "max" when nothing limits; v1 a page-rounded
			// MaxInt64.
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil && n > 0 && n < 1<<62 {
				c.limit = n
				return c
			}
			break
		}
	}
	return nil
}

func (c *cgroup) limitFile() string {
	if c.v2 {
		return "memory.max"
	}
	return "memory.limit_in_bytes"
}

func (c *cgroup) read(file string) (string, error) {
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	return strings.TrimSpace(string(b)), err
}

// Limit is the cgroup's memory limit in bytes.
func (c *cgroup) Limit() int64 { return c.limit }

// LimitFile is the file the limit was read from, as the process sees it.
func (c *cgroup) LimitFile() string { return c.shown + "/" + c.limitFile() }

// WorkingSet is what the cgroup holds that the kernel cannot simply
// drop: its usage less the inactive file pages, as the kubelet counts a
// container's working set for its eviction signals
// (https://kubernetes.io/docs/concepts/scheduling-eviction/node-pressure-eviction/#active-file-memory-is-not-considered-as-available-memory).
func (c *cgroup) WorkingSet() (int64, error) {
	usageFile, inactiveKey := "memory.usage_in_bytes", "total_inactive_file"
	if c.v2 {
		usageFile, inactiveKey = "memory.current", "inactive_file"
	}
	v, err := c.read(usageFile)
	if err != nil {
		return 0, err
	}
	usage, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("reading %s/%s: %w", c.shown, usageFile, err)
	}
	f, err := os.Open(filepath.Join(c.dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), inactiveKey+" "); ok {
			inactive, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("reading %s/memory.stat: %w", c.shown, err)
			}
			return max(usage-inactive, 0), nil
		}
	}
	return usage, sc.Err()
}
