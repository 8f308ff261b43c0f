package site

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubestore/kubestore/access"
	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
)

// issue is a certificate for subject with usage, signed by parent's key
// (self-signed, a CA, when parent is nil).
func issue(t *testing.T, subject string, usage x509.ExtKeyUsage, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: subject},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// A joiner sends the join secret only to a member's serving certificate:
// a server with a kubelet's serving certificate of the site's CA (the CSR
// signer issues those) gets nothing secret, though the CA pin matches.
func TestJoinRefusesAServerThatIsNotAMember(t *testing.T) {
	ca, caKey := issue(t, "kubestore-ca", 0, nil, nil)
	for _, tc := range []struct {
		subject string
		ok      bool
	}{
		{"system:node:edge-b", false},
		{access.ServingCommonName, true},
	} {
		t.Run(tc.subject, func(t *testing.T) {
			leaf, key := issue(t, tc.subject, x509.ExtKeyUsageServerAuth, ca, caKey)
			var secretSeen atomic.Bool
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case CAPath:
					w.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})) //nolint:errcheck
				case JoinPath:
					if strings.Contains(r.Header.Get("Authorization"), "the-secret") {
						secretSeen.Store(true)
					}
					w.Write([]byte(`{"member":true}`)) //nolint:errcheck
				}
			}))
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Raw}, PrivateKey: key}}}
			srv.StartTLS()
			defer srv.Close()
			token := config.JoinToken{CAHash: sha256.Sum256(ca.Raw), Secret: "the-secret"}
			_, err := join(t.Context(), srv.URL, token, nil, joinRequest{Name: "gw-b", PeerURL: "https://127.0.0.1:2380"})
			if tc.ok != (err == nil) || secretSeen.Load() != tc.ok {
				t.Errorf("join to a server with a certificate for %q: %v (secret sent %t), want ok %t", tc.subject, err, secretSeen.Load(), tc.ok)
			}
		})
	}
}

// A member whose raft log lost what it had acknowledged keeps its data
// until the site answers that it takes it back: with no site to answer
// (every member lost its tail in one power cut), nothing is moved aside.
func TestLostLogDataStaysUntilTheSiteAnswers(t *testing.T) {
	dir := dirWithEtcdData(t)
	if err := os.WriteFile(dir.RaftLogLost(), []byte("tocommit(12) is out of range [lastIndex(9)]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	cfg := config.Default()
	cfg.DataDir = string(dir)
	cfg.Site = config.Site{MemberName: "gw-b", PeerAdvertiseAddress: "127.0.0.1", PeerBindAddress: "127.0.0.1", PeerPort: 2380,
		Join: "https://" + closed, JoinToken: config.FormatJoinToken([]byte("a CA"), "a-secret-of-sixteen-or-more")}
	err = Prepare(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), "stays") {
		t.Errorf("Prepare with no site to answer: %v, want a refusal saying the data stays", err)
	}
	if !dir.HasEtcdData() {
		t.Error("the data was moved aside before the site answered")
	}
	if _, err := os.Stat(dir.RaftLogLost()); err != nil {
		t.Errorf("the record of the lost log is gone: %v", err)
	}
}

// A member its etcd found removed waits for the site to answer before it
// starts: its data cannot serve. It used to start on it when the site was
// not reachable (a site of two members whose other was restarting), and
// stop again at once, removed, with nobody to start it (found by the
// model checker, issue 48).
func TestRemovedMemberWaitsForTheSite(t *testing.T) {
	dir := dirWithEtcdData(t)
	if err := os.WriteFile(dir.EtcdRemoved(), []byte("removed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca, caKey := issue(t, "kubestore-ca", 0, nil, nil)
	leaf, key := issue(t, access.ServingCommonName, x509.ExtKeyUsageServerAuth, ca, caKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // refused until the site is back
	cfg := config.Default()
	cfg.DataDir = string(dir)
	cfg.Site = config.Site{MemberName: "gw-b", PeerAdvertiseAddress: "127.0.0.1", PeerBindAddress: "127.0.0.1", PeerPort: 2380,
		Join: "https://" + addr, JoinToken: config.FormatJoinToken(ca.Raw, "a-secret-of-sixteen-or-more")}
	done := make(chan error, 1)
	go func() { done <- joinIfNeeded(t.Context(), cfg, dir, "") }()
	select {
	case err := <-done:
		t.Fatalf("with the site unreachable, joinIfNeeded returned (%v): the member would start on its removed data", err)
	case <-time.After(3 * time.Second):
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case CAPath:
			w.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})) //nolint:errcheck
		case JoinPath:
			w.Write([]byte(`{"member":true}`)) //nolint:errcheck
		}
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Raw}, PrivateKey: key}}}
	srv.StartTLS()
	defer srv.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("once the site answered: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the member did not ask the site again within 30 s of its return")
	}
}

// dirWithEtcdData is a data directory whose etcd has data (a WAL file).
func dirWithEtcdData(t *testing.T) datadir.Dir {
	t.Helper()
	dir := datadir.Dir(t.TempDir())
	wal := filepath.Join(dir.Etcd(), "member", "wal")
	if err := os.MkdirAll(wal, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wal, "0000000000000000-0000000000000000.wal"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}
