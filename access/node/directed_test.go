package node

import (
	"testing"
)

// These tests are kubestore's: they check that directedGraph keeps the
// semantics of the forked gonum graph the node authorizer relied on.

func newTestVertices(g *directedGraph, names ...string) map[string]*namedVertex {
	vertices := map[string]*namedVertex{}
	for _, name := range names {
		v := newNamedVertex(podVertexType, "", name, g.newID())
		g.addVertex(v)
		vertices[name] = v
	}
	return vertices
}

func TestDirectedGraphEdges(t *testing.T) {
	g := newDirectedGraph()
	v := newTestVertices(g, "a", "b", "c")

	ab := &edge{from: v["a"], to: v["b"]}
	g.setEdge(ab)
	g.setEdge(&edge{from: v["a"], to: v["c"]})
	if got := g.degree(v["a"]); got != 2 {
		t.Errorf("degree(a) = %d, want 2", got)
	}
	if got := g.degree(v["b"]); got != 1 {
		t.Errorf("degree(b) = %d, want 1", got)
	}
	if g.edgeBetween(v["a"], v["b"]) != ab || g.edgeBetween(v["b"], v["a"]) != ab {
		t.Error("edgeBetween does not find a->b from both ends")
	}
	if g.edgeBetween(v["b"], v["c"]) != nil {
		t.Error("edgeBetween finds an edge b-c")
	}

	// one edge per pair: b->a replaces a->b
	ba := &edge{from: v["b"], to: v["a"]}
	g.setEdge(ba)
	if g.edgeBetween(v["a"], v["b"]) != ba {
		t.Error("setting b->a did not replace a->b")
	}
	if got := g.degree(v["a"]); got != 2 {
		t.Errorf("degree(a) after replacing = %d, want 2", got)
	}
	var from []string
	g.visitFrom(v["a"], func(n *namedVertex, _ *edge) bool {
		from = append(from, n.name)
		return true
	})
	if len(from) != 1 || from[0] != "c" {
		t.Errorf("visitFrom(a) = %v, want [c]", from)
	}
	var to []string
	g.visitTo(v["a"], func(n *namedVertex, _ *edge) bool {
		to = append(to, n.name)
		return true
	})
	if len(to) != 1 || to[0] != "b" {
		t.Errorf("visitTo(a) = %v, want [b]", to)
	}

	g.removeEdge(ba)
	if g.edgeBetween(v["a"], v["b"]) != nil || g.degree(v["b"]) != 0 {
		t.Error("removeEdge left the edge")
	}

	// removing a vertex removes its edges at the other ends
	g.removeVertex(v["a"])
	if g.has(v["a"]) || g.degree(v["c"]) != 0 || g.degree(v["a"]) != 0 {
		t.Error("removeVertex left the vertex or its edges")
	}
	g.removeVertex(v["a"]) // removing again does nothing

	// IDs are not reused
	if id := g.newID(); id != 3 {
		t.Errorf("newID() = %d, want 3", id)
	}
}

func TestDirectedGraphSelfEdgePanics(t *testing.T) {
	g := newDirectedGraph()
	v := newTestVertices(g, "a")
	defer func() {
		if recover() == nil {
			t.Error("expected a panic")
		}
	}()
	g.setEdge(&edge{from: v["a"], to: v["a"]})
}

func TestDirectedGraphWalk(t *testing.T) {
	g := newDirectedGraph()
	v := newTestVertices(g, "a", "b", "c", "d", "e")
	// a -> b -> d, a -> c -> d (a diamond), and e -> a against the walk
	g.setEdge(&edge{from: v["a"], to: v["b"]})
	g.setEdge(&edge{from: v["a"], to: v["c"], destination: v["e"]})
	g.setEdge(&edge{from: v["b"], to: v["d"]})
	g.setEdge(&edge{from: v["c"], to: v["d"]})
	g.setEdge(&edge{from: v["e"], to: v["a"]})

	visits := map[string]int{}
	found := g.walk(v["a"], nil, func(n *namedVertex) bool {
		visits[n.name]++
		return false
	})
	if found != nil {
		t.Errorf("walk found %v", found)
	}
	if len(visits) != 4 || visits["a"] != 1 || visits["b"] != 1 || visits["c"] != 1 || visits["d"] != 1 {
		t.Errorf("walk visited %v, want a, b, c and d once each", visits)
	}

	// until stops the walk at the start
	if found := g.walk(v["a"], nil, func(n *namedVertex) bool { return n == v["a"] }); found != v["a"] {
		t.Errorf("walk returned %v, want a", found)
	}
	// and at a reached vertex
	if found := g.walk(v["a"], nil, func(n *namedVertex) bool { return n == v["d"] }); found != v["d"] {
		t.Errorf("walk returned %v, want d", found)
	}
	// edges follow refuses are not followed
	noDestinationEdges := func(e *edge) bool { return e.destination == nil }
	visits = map[string]int{}
	g.walk(v["a"], noDestinationEdges, func(n *namedVertex) bool {
		visits[n.name]++
		return false
	})
	if len(visits) != 3 || visits["c"] != 0 {
		t.Errorf("walk without destination edges visited %v, want a, b and d", visits)
	}
	// edges are followed in their direction only
	if found := g.walk(v["d"], nil, func(n *namedVertex) bool { return n == v["a"] }); found != nil {
		t.Errorf("walk from d against the edges found %v", found)
	}
}
