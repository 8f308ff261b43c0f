package node

// This file is kubestore's own small directed graph. It replaces the parts
// of k8s.io/kubernetes third_party/forked/gonum/graph that the node
// authorizer uses (simple.DirectedAcyclicGraph and
// traverse.VisitingDepthFirst) and keeps the semantics the authorizer relies
// on:
//
//   - there is at most one edge between any two vertices, whatever its
//     direction (the fork stores edges in an undirected graph), so setting
//     an edge replaces the one already between the pair;
//   - the degree of a vertex counts its edges in both directions;
//   - removing a vertex removes every edge touching it;
//   - walk is a depth-first traversal along outgoing edges that an edge
//     filter accepts, visiting each vertex at most once and stopping as soon
//     as its until function returns true for a newly reached vertex.
//
// Vertex IDs are handed out from a counter and never reused (the fork
// reuses freed IDs); nothing depends on reuse, and never reusing an ID
// means a stale ID can never name a different vertex.

// edge is a directed edge of the graph. When destination is set, the edge
// is upstream's destinationEdge: it carries a denormalized reference to the
// node vertex the edge finally leads to, which should only be used when a
// single node vertex is reachable through the edge's to vertex.
type edge struct {
	from, to    *namedVertex
	destination *namedVertex
}

// destinationID returns the ID of the node vertex the edge leads to, and
// false for an edge that is not a destination edge.
func (e *edge) destinationID() (int, bool) {
	if e.destination == nil {
		return 0, false
	}
	return e.destination.id, true
}

// String returns the edge as "from -> to", with the destination of a
// destination edge in parentheses.
func (e *edge) String() string {
	s := e.from.String() + " -> " + e.to.String()
	if e.destination != nil {
		s += " (destination " + e.destination.String() + ")"
	}
	return s
}

// adjacency holds the edges touching one vertex, keyed by the ID of the
// vertex at the other end. The maps are created when first needed.
type adjacency struct {
	out map[int]*edge
	in  map[int]*edge
}

// directedGraph is a directed graph of named vertices. It is not safe for
// concurrent use; Graph guards it with its lock.
type directedGraph struct {
	nextID   int
	vertices map[int]*namedVertex
	edges    map[int]*adjacency
}

func newDirectedGraph() *directedGraph {
	return &directedGraph{
		vertices: map[int]*namedVertex{},
		edges:    map[int]*adjacency{},
	}
}

// newID returns an ID no vertex of the graph has had.
func (g *directedGraph) newID() int {
	id := g.nextID
	g.nextID++
	return id
}

// has reports whether v is a vertex of the graph.
func (g *directedGraph) has(v *namedVertex) bool {
	_, ok := g.vertices[v.id]
	return ok
}

// addVertex adds v to the graph. It panics if another vertex has v's ID.
func (g *directedGraph) addVertex(v *namedVertex) {
	if _, exists := g.vertices[v.id]; exists {
		panic("node authorizer graph: vertex ID collision")
	}
	g.vertices[v.id] = v
	g.edges[v.id] = &adjacency{}
}

// removeVertex removes v and every edge touching it. Removing a vertex that
// is not in the graph does nothing.
func (g *directedGraph) removeVertex(v *namedVertex) {
	adj, ok := g.edges[v.id]
	if !ok {
		return
	}
	for to := range adj.out {
		delete(g.edges[to].in, v.id)
	}
	for from := range adj.in {
		delete(g.edges[from].out, v.id)
	}
	delete(g.edges, v.id)
	delete(g.vertices, v.id)
}

// setEdge adds e, replacing the edge already between its two vertices in
// either direction. Vertices not yet in the graph are added. It panics on
// an edge from a vertex to itself.
func (g *directedGraph) setEdge(e *edge) {
	if e.from.id == e.to.id {
		panic("node authorizer graph: adding self edge")
	}
	if !g.has(e.from) {
		g.addVertex(e.from)
	}
	if !g.has(e.to) {
		g.addVertex(e.to)
	}
	from, to := g.edges[e.from.id], g.edges[e.to.id]
	// one edge per pair of vertices: drop an edge in the other direction
	delete(from.in, e.to.id)
	delete(to.out, e.from.id)
	if from.out == nil {
		from.out = map[int]*edge{}
	}
	if to.in == nil {
		to.in = map[int]*edge{}
	}
	from.out[e.to.id] = e
	to.in[e.from.id] = e
}

// removeEdge removes the edge between e's vertices, if both are in the
// graph.
func (g *directedGraph) removeEdge(e *edge) {
	from, ok := g.edges[e.from.id]
	if !ok {
		return
	}
	to, ok := g.edges[e.to.id]
	if !ok {
		return
	}
	delete(from.out, e.to.id)
	delete(from.in, e.to.id)
	delete(to.in, e.from.id)
	delete(to.out, e.from.id)
}

// edgeBetween returns the edge between x and y in either direction, or nil.
func (g *directedGraph) edgeBetween(x, y *namedVertex) *edge {
	adj, ok := g.edges[x.id]
	if !ok {
		return nil
	}
	if e, ok := adj.out[y.id]; ok {
		return e
	}
	if e, ok := adj.in[y.id]; ok {
		return e
	}
	return nil
}

// degree returns the number of edges touching v, in both directions.
func (g *directedGraph) degree(v *namedVertex) int {
	adj, ok := g.edges[v.id]
	if !ok {
		return 0
	}
	return len(adj.out) + len(adj.in)
}

// visitFrom calls visitor with each edge leaving v and the vertex it leads
// to, until visitor returns false.
func (g *directedGraph) visitFrom(v *namedVertex, visitor func(to *namedVertex, e *edge) bool) {
	adj, ok := g.edges[v.id]
	if !ok {
		return
	}
	for _, e := range adj.out {
		if !visitor(e.to, e) {
			return
		}
	}
}

// visitTo calls visitor with each edge entering v and the vertex it comes
// from, until visitor returns false.
func (g *directedGraph) visitTo(v *namedVertex, visitor func(from *namedVertex, e *edge) bool) {
	adj, ok := g.edges[v.id]
	if !ok {
		return
	}
	for _, e := range adj.in {
		if !visitor(e.from, e) {
			return
		}
	}
}

// walk traverses the graph depth first from start along the outgoing edges
// follow accepts (every edge when follow is nil), visiting each vertex at
// most once. It returns the first vertex, start included, for which until
// returns true, or nil when the traversal ends without one. This is the
// behaviour of the fork's traverse.VisitingDepthFirst.Walk.
func (g *directedGraph) walk(start *namedVertex, follow func(e *edge) bool, until func(v *namedVertex) bool) *namedVertex {
	visited := map[int]bool{start.id: true}
	if until != nil && until(start) {
		return start
	}
	stack := []*namedVertex{start}
	var found *namedVertex
	for len(stack) > 0 {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		g.visitFrom(t, func(n *namedVertex, e *edge) bool {
			if follow != nil && !follow(e) {
				return true
			}
			if visited[n.id] {
				return true
			}
			visited[n.id] = true
			stack = append(stack, n)
			if until != nil && until(n) {
				found = n
				return false
			}
			return true
		})
		if found != nil {
			return found
		}
	}
	return nil
}
