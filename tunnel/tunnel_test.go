package tunnel

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A destination is the node's kubelet only at one of its addresses and
// the port it reports (10250 when none).
func TestKubelet(t *testing.T) {
	n := &corev1.Node{}
	n.Name = "edge-1"
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}, {Type: corev1.NodeHostName, Address: "edge-1"}}
	for _, c := range []struct {
		host, port string
		reported   int32
		ok         bool
	}{
		{"10.0.0.5", "10250", 0, true},
		{"edge-1", "10250", 0, true},
		{"10.0.0.5", "10255", 0, false},
		{"10.0.0.5", "10255", 10255, true},
		{"10.0.0.5", "10250", 10255, false},
		{"10.0.0.6", "10250", 0, false},
		{"127.0.0.1", "10250", 0, false},
	} {
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = c.reported
		if err := Kubelet(n, c.host, c.port); (err == nil) != c.ok {
			t.Errorf("%s:%s with the kubelet's port %d: %v, want ok %t", c.host, c.port, c.reported, err, c.ok)
		}
	}
}

// BenchmarkIdleTunnels prints what an idle tunnel costs: the heap and
// goroutines of both ends (a gateway's client and its session at the
// endpoint, in one process here), per tunnel, over 200 tunnels on
// loopback TLS.
func BenchmarkIdleTunnels(b *testing.B) {
	const gateways = 200
	ca, caKey := testCA(b)
	serving := issue(b, ca, caKey, pkix.Name{CommonName: "endpoint"}, x509.ExtKeyUsageServerAuth)
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(ca)
	e := NewEndpoint(nil, clientCAs)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{serving}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: clientCAs}
	srv := &http.Server{Handler: e.TunnelHandler(), TLSConfig: tlsCfg}
	go srv.Serve(tls.NewListener(l, tlsCfg))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	certs := make([]tls.Certificate, gateways)
	for i := range certs {
		certs[i] = issue(b, ca, caKey, pkix.Name{CommonName: fmt.Sprintf("system:node:edge-%d", i), Organization: []string{"system:nodes"}}, x509.ExtKeyUsageClientAuth)
	}
	for b.Loop() {
		before, goroutines := heap()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{}, gateways)
		for i := range gateways {
			c := &Client{Endpoint: "https://" + l.Addr().String(), NodeName: fmt.Sprintf("edge-%d", i),
				TLS: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", Certificates: []tls.Certificate{certs[i]}}}
			go func() { c.Run(ctx); done <- struct{}{} }()
		}
		deadline := time.Now().Add(30 * time.Second)
		for len(e.Connected()) < gateways && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if n := len(e.Connected()); n < gateways {
			b.Fatalf("%d of %d tunnels open", n, gateways)
		}
		time.Sleep(time.Second)
		after, goroutinesAfter := heap()
		b.ReportMetric(float64(after-before)/gateways, "heap-B/tunnel")
		b.ReportMetric(float64(goroutinesAfter-goroutines)/gateways, "goroutines/tunnel")
		cancel()
		for range gateways {
			<-done
		}
	}
}

func heap() (uint64, int) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, runtime.NumGoroutine()
}

func testCA(b *testing.B) (*x509.Certificate, *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		b.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		b.Fatal(err)
	}
	return ca, key
}

func issue(b *testing.B, ca *x509.Certificate, caKey *ecdsa.PrivateKey, subject pkix.Name, usage x509.ExtKeyUsage) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: serial, Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}, ca, key.Public(), caKey)
	if err != nil {
		b.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
