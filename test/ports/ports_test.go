package ports

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeNeverRepeats: a thousand single ports, each from its own call as
// each gateway of a site takes its own, are all different, and all below
// the ephemeral range. Without the record of handed-out ports, random picks
// out of its ~12.8k ports repeat within a thousand draws almost surely (the
// birthday bound).
func TestFreeNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 1000 {
		p := Free(t, 1)[0]
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		if p < Low || p >= High {
			t.Fatalf("port %d outside [%d, %d)", p, Low, High)
		}
		seen[p] = true
	}
	if got := Free(t, 3); len(got) != 3 || seen[got[0]] || seen[got[1]] || seen[got[2]] || got[0] == got[1] || got[1] == got[2] || got[0] == got[2] {
		t.Fatalf("Free(3) = %v, repeats a port", got)
	}
}

// TestPickSkipsABoundPort: a port something listens on is never handed out.
func TestPickSkipsABoundPort(t *testing.T) {
	var held []int
	for range 200 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		held = append(held, ln.Addr().(*net.TCPAddr).Port)
	}
	// And ports in the range: bind a block of them.
	for p := Low; p < Low+500; p++ {
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			defer ln.Close()
			held = append(held, p)
		}
	}
	got, err := Pick(2000)
	if err != nil {
		t.Fatal(err)
	}
	bound := map[int]bool{}
	for _, p := range held {
		bound[p] = true
	}
	for _, p := range got {
		if bound[p] {
			t.Fatalf("Pick handed out %d, which is bound", p)
		}
	}
}
