package server

// RelieveMemoryPressure is what the server does under memory pressure
// (memory.Pressure), for the tests to drive without filling the heap.
func (s *Server) RelieveMemoryPressure() []string { return s.pressure.Relieve("a test", true) }
