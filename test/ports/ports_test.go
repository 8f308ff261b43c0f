package ports

import "testing"

// TestFreeNeverRepeats: a thousand single ports, each from its own call as
// each gateway of a site takes its own, are all different. Without the
// record of handed-out ports the kernel's picks out of its ~28k ephemeral
// ports repeat within a thousand draws almost surely (the birthday bound).
func TestFreeNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 1000 {
		p := Free(t, 1)[0]
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	if got := Free(t, 3); len(got) != 3 || seen[got[0]] || seen[got[1]] || seen[got[2]] || got[0] == got[1] || got[1] == got[2] || got[0] == got[2] {
		t.Fatalf("Free(3) = %v, repeats a port", got)
	}
}
