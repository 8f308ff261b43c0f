package tunnel

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// EndpointOptions configure `kubestore tunnel-endpoint`; each field is the
// flag of its name.
type EndpointOptions struct {
	// Kubeconfig reaches the cluster (its Nodes, TokenReview and
	// SubjectAccessReview); empty is the in-cluster configuration.
	Kubeconfig string
	// BindAddress and SecurePort are where gateways connect (TLS).
	BindAddress string
	SecurePort  int
	// TLSCertFile and TLSPrivateKeyFile are the endpoint's serving
	// certificate; ClientCAFile, when set, verifies gateways' client
	// certificates (the cluster's client CA).
	TLSCertFile, TLSPrivateKeyFile, ClientCAFile string
	// ConnectSocket is the unix socket kube-apiserver's egress selector
	// sends its CONNECT requests to.
	ConnectSocket string
	// Ready, when set, is called with the gateways' listener's address
	// once both listeners serve.
	Ready func(addr net.Addr)
}

// Endpoint flags, named in configuration errors.
const (
	FlagKubeconfig        = "kubeconfig"
	FlagBindAddress       = "bind-address"
	FlagSecurePort        = "secure-port"
	FlagTLSCertFile       = "tls-cert-file"
	FlagTLSPrivateKeyFile = "tls-private-key-file"
	FlagClientCAFile      = "client-ca-file"
	FlagConnectSocket     = "connect-socket"
)

func invalid(flag string, value any, why string) error {
	return fmt.Errorf("invalid --%s %q: %s", flag, fmt.Sprint(value), why)
}

// ServeEndpoint runs a tunnel endpoint until ctx ends.
func ServeEndpoint(ctx context.Context, o EndpointOptions) error {
	if o.SecurePort < 0 || o.SecurePort > 65535 {
		return invalid(FlagSecurePort, o.SecurePort, "must be a port, 0 to 65535")
	}
	if net.ParseIP(o.BindAddress) == nil {
		return invalid(FlagBindAddress, o.BindAddress, "must be an IP address")
	}
	if o.ConnectSocket == "" {
		return invalid(FlagConnectSocket, o.ConnectSocket, "must be the path of the unix socket kube-apiserver's egress selector dials")
	}
	cert, err := tls.LoadX509KeyPair(o.TLSCertFile, o.TLSPrivateKeyFile)
	if err != nil {
		return invalid(FlagTLSCertFile, o.TLSCertFile, fmt.Sprintf("with --%s %q: %v", FlagTLSPrivateKeyFile, o.TLSPrivateKeyFile, err))
	}
	var clientCAs *x509.CertPool
	if o.ClientCAFile != "" {
		pem, err := os.ReadFile(o.ClientCAFile)
		if err != nil {
			return invalid(FlagClientCAFile, o.ClientCAFile, err.Error())
		}
		clientCAs = x509.NewCertPool()
		if !clientCAs.AppendCertsFromPEM(pem) {
			return invalid(FlagClientCAFile, o.ClientCAFile, "holds no PEM certificate")
		}
	}
	var cfg *rest.Config
	if o.Kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	}
	if err != nil {
		return invalid(FlagKubeconfig, o.Kubeconfig, err.Error())
	}
	cfg.UserAgent = "kubestore-tunnel-endpoint"
	client, err := NewClusterClient(cfg)
	if err != nil {
		return invalid(FlagKubeconfig, o.Kubeconfig, err.Error())
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e := NewEndpoint(client, clientCAs)
	if err := e.Run(ctx); err != nil {
		return err
	}
	gateways, err := net.Listen("tcp", net.JoinHostPort(o.BindAddress, fmt.Sprint(o.SecurePort)))
	if err != nil {
		return invalid(FlagSecurePort, o.SecurePort, err.Error())
	}
	if err := os.MkdirAll(filepath.Dir(o.ConnectSocket), 0o700); err != nil {
		gateways.Close()
		return invalid(FlagConnectSocket, o.ConnectSocket, err.Error())
	}
	if err := os.Remove(o.ConnectSocket); err != nil && !errors.Is(err, os.ErrNotExist) {
		gateways.Close()
		return invalid(FlagConnectSocket, o.ConnectSocket, err.Error())
	}
	connects, err := net.Listen("unix", o.ConnectSocket)
	if err != nil {
		gateways.Close()
		return invalid(FlagConnectSocket, o.ConnectSocket, err.Error())
	}
	mux := http.NewServeMux()
	mux.Handle(Path, e.TunnelHandler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("/metrics", legacyregistry.Handler())
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if clientCAs != nil {
		tlsCfg.ClientAuth, tlsCfg.ClientCAs = tls.VerifyClientCertIfGiven, clientCAs
	}
	servers := []*http.Server{
		{Handler: mux, TLSConfig: tlsCfg, ReadHeaderTimeout: dialTimeout, ErrorLog: klog.NewStandardLogger("INFO")},
		{Handler: e.ConnectHandler(), ReadHeaderTimeout: dialTimeout, ErrorLog: klog.NewStandardLogger("INFO")},
	}
	errs := make(chan error, 2)
	go func() { errs <- servers[0].Serve(tls.NewListener(gateways, tlsCfg)) }()
	go func() { errs <- servers[1].Serve(connects) }()
	klog.InfoS("Tunnel endpoint serving", "gateways", gateways.Addr().String(), "connect", o.ConnectSocket)
	if o.Ready != nil {
		o.Ready(gateways.Addr())
	}
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer scancel()
	for _, s := range servers {
		s.Shutdown(sctx)
	}
	cancel()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
