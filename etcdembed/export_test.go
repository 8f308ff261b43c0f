package etcdembed

// CloseClientListeners closes the member's client listeners under it, the
// fault a dying socket is: etcd's serving goroutines then report an error.
func CloseClientListeners(s *Server) {
	for _, sctx := range s.etcd.Clients {
		sctx.Close()
	}
}
