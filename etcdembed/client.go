package etcdembed

import (
	"fmt"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"google.golang.org/grpc"

	"github.com/kubestore/kubestore/config"
)

// Timeouts of every etcd client, as kube-apiserver's storage factory uses
// (k8s.io/apiserver/pkg/storage/storagebackend/factory/etcd3.go).
const (
	dialTimeout      = 20 * time.Second
	keepaliveTime    = 30 * time.Second
	keepaliveTimeout = 10 * time.Second
)

// ClientConfig is the configuration of a client to endpoints of the etcd
// cfg names (see Endpoints): kube-apiserver's timeouts, the client
// certificate and CA of --etcd-certfile, --etcd-keyfile and --etcd-cafile
// when given, etcd's logger, and the settling of writes etcd stored but
// answered with "no space" (settler).
func ClientConfig(endpoints []string, cfg config.Etcd, log config.Log) (clientv3.Config, error) {
	ccfg := clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          dialTimeout,
		DialKeepAliveTime:    keepaliveTime,
		DialKeepAliveTimeout: keepaliveTimeout,
	}
	tlsInfo := transport.TLSInfo{CertFile: cfg.CertFile, KeyFile: cfg.KeyFile, TrustedCAFile: cfg.CAFile}
	if !tlsInfo.Empty() || cfg.CAFile != "" {
		tc, err := tlsInfo.ClientConfig()
		if err != nil {
			return clientv3.Config{}, fmt.Errorf("reading etcd client TLS files: %w", err)
		}
		ccfg.TLS = tc
	}
	lg, err := Logger(log)
	if err != nil {
		return clientv3.Config{}, err
	}
	ccfg.Logger = lg.Named("client")
	// A write etcd stored and answered with "no space" is acknowledged.
	ccfg.DialOptions = append(ccfg.DialOptions, grpc.WithChainUnaryInterceptor(newSettler().UnaryClientInterceptor()))
	return ccfg, nil
}

// Dial connects a client to endpoints of the etcd cfg names, configured
// as ClientConfig says, with opts added (a server's WriteGuards). It is
// the one place kubestore dials etcd: the server's shared client and
// each command's.
func Dial(endpoints []string, cfg config.Etcd, log config.Log, opts ...grpc.DialOption) (*kubernetes.Client, error) {
	ccfg, err := ClientConfig(endpoints, cfg, log)
	if err != nil {
		return nil, err
	}
	ccfg.DialOptions = append(ccfg.DialOptions, opts...)
	c, err := kubernetes.New(ccfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to etcd %v: %w", endpoints, err)
	}
	return c, nil
}
