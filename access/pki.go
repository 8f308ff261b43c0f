package access

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// renewBefore: a leaf certificate closer than this to expiry is
	// replaced at start and by the renewal loop.
	renewBefore = 90 * 24 * time.Hour
	// clockSkew backdates NotBefore: a device without a battery-backed
	// clock may boot a little behind the machine that set it.
	clockSkew = time.Hour

	// AdminUser is the identity of the generated admin certificate.
	AdminUser = "kubestore-admin"
	// kubeconfigName names the cluster, user and context in the kubeconfig.
	kubeconfigName = "kubestore"
)

// PKI is the certificate authority of one data directory and the leaf
// certificates it signs: the serving certificate and the admin client
// certificate written into admin.kubeconfig.
type PKI struct {
	dir string
	// mu guards the CA, which a rotation replaces (rotate.go), and the
	// files of the leaves issued with it.
	mu     sync.Mutex
	caCert *x509.Certificate
	caKey  crypto.Signer
	// caPEM is ca.crt: the CA that signs, first, then during a rotation
	// the previous one, still trusted.
	caPEM []byte
	// cross, during and after a rotation, is the signing CA certified by
	// the previous one (ca-cross.crt): every leaf carries it, so that a
	// peer that trusts only the previous CA still verifies the leaf.
	cross []byte
	// hosts are the names and IPs the serving certificate must cover.
	hosts    []string
	serving  *certKeyProvider
	clientCA *caProvider
	// peerHosts, on a site's member, are what its peer certificate covers
	// (Peer).
	peerHosts []string
}

// LoadPKI loads the CA and the leaf certificates from <data-dir>/pki,
// creating whatever is missing, expiring or, for the serving certificate,
// not covering hosts.
func LoadPKI(dir datadir.Dir, hosts []string) (*PKI, error) {
	p := &PKI{dir: dir.PKI(), hosts: hosts}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating pki directory: %w", err)
	}
	p.serving = &certKeyProvider{name: "serving-cert"}
	p.clientCA = &caProvider{seen: make(chan struct{}, 1)}
	if err := p.loadCA(); err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := p.leaf("serving", p.servingTemplate)
	if err != nil {
		return nil, err
	}
	p.serving.set(certPEM, keyPEM)
	return p, nil
}

// ServingHosts are the names and IPs the serving certificate covers: a
// site's member's also the address its peers reach it at, where the
// members of a site and its joiners call its API.
func ServingHosts(s config.Server, site config.Site) []string {
	hosts := []string{"localhost", "kubestore", "127.0.0.1", "::1"}
	if ip := net.ParseIP(s.BindAddress); ip != nil && !ip.IsUnspecified() {
		hosts = append(hosts, ip.String())
	}
	// The names and address of the Service default/kubernetes, and its
	// endpoint, where in-cluster clients call, as kube-apiserver's.
	hosts = append(hosts, "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
	if cidrs, err := config.ParseServiceClusterIPRange(s.ServiceClusterIPRange); err == nil {
		hosts = append(hosts, config.KubernetesServiceIP(cidrs[0]).String())
	}
	if ip, ok := s.AdvertisedAddress(); ok {
		hosts = append(hosts, ip.String())
	}
	if site.Enabled() {
		hosts = append(hosts, site.PeerAdvertiseAddress)
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	return append(hosts, s.TLSSANs...)
}

// CAPEM is the CA bundle, for clients to trust the server: the CA that
// signs and, during a rotation, the previous one.
func (p *PKI) CAPEM() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.caPEM)
}

// CA is the certificate authority's certificate and key, and the chain
// (PEM) that follows each certificate it issues: the CSR signing
// controller issues client and kubelet serving certificates with them, so
// that the client certificates it issues authenticate here. A rotation
// replaces them: ask again for each certificate.
func (p *PKI) CA() (*x509.Certificate, crypto.Signer, []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.caCert, p.caKey, slices.Clone(p.cross)
}

// ClientCA verifies client certificates: those a trusted CA signed (both
// during a rotation).
func (p *PKI) ClientCA() dynamiccertificates.CAContentProvider { return p.clientCA }

// Serving is the serving certificate and key; Renew replaces them in place.
func (p *PKI) Serving() dynamiccertificates.CertKeyContentProvider { return p.serving }

func (p *PKI) path(name string) string { return filepath.Join(p.dir, name) }

// loadCA loads ca.crt, ca.key and ca-cross.crt, creating the CA on the
// first start. Called with mu held, or before p is shared.
func (p *PKI) loadCA() error {
	certPEM, cert, key, err := readPair(p.path("ca.crt"), p.path("ca.key"))
	if errors.Is(err, os.ErrNotExist) {
		var der []byte
		if der, key, err = newCA("kubestore-ca"); err != nil {
			return err
		}
		certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		if err := writePair(p.path("ca.crt"), p.path("ca.key"), certPEM, key); err != nil {
			return err
		}
		cert, err = x509.ParseCertificate(der)
	}
	if err != nil {
		return fmt.Errorf("loading CA from %s: %w", p.dir, err)
	}
	cross, err := os.ReadFile(p.path(crossFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if c, err := x509.ParseCertificate(pemBlock(cross)); err != nil || time.Now().After(c.NotAfter) ||
		!bytes.Equal(c.RawSubjectPublicKeyInfo, cert.RawSubjectPublicKeyInfo) {
		cross = nil // none, expired, or of an earlier rotation
	}
	p.caPEM, p.caCert, p.caKey, p.cross = certPEM, cert, key, cross
	return p.clientCA.set(certPEM, cert.SubjectKeyId)
}

// newCA creates a CA named cn: its certificate (DER) and key.
func newCA(cn string) ([]byte, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating CA: %w", err)
	}
	return der, key, nil
}

// leaf returns the certificate and key stored under name, issuing new ones
// when they are missing, not signed by the CA, close to expiry, or no
// longer matching template. A new certificate is followed by the cross
// certificate of a rotation. Called with mu held.
func (p *PKI) leaf(name string, template func() *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	certFile, keyFile := p.path(name+".crt"), p.path(name+".key")
	want := template()
	if certPEM, cert, key, err := readPair(certFile, keyFile); err == nil && p.valid(cert, want) {
		keyPEM, err := encodeKey(key)
		return certPEM, keyPEM, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, want, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("issuing %s certificate: %w", name, err)
	}
	certPEM = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), p.cross...)
	if err := writePair(certFile, keyFile, certPEM, key); err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	return certPEM, keyPEM, err
}

// valid reports whether cert can be kept in place of want.
func (p *PKI) valid(cert, want *x509.Certificate) bool {
	if err := cert.CheckSignatureFrom(p.caCert); err != nil {
		return false
	}
	if time.Until(cert.NotAfter) < renewBefore {
		return false
	}
	ips := func(list []net.IP) []string {
		out := make([]string, 0, len(list))
		for _, ip := range list {
			out = append(out, ip.String())
		}
		return out
	}
	return cert.Subject.CommonName == want.Subject.CommonName &&
		slices.Equal(cert.Subject.Organization, want.Subject.Organization) &&
		sets.New(cert.DNSNames...).IsSuperset(sets.New(want.DNSNames...)) &&
		sets.New(ips(cert.IPAddresses)...).IsSuperset(sets.New(ips(want.IPAddresses)...))
}

func (p *PKI) leafTemplate(cn string, orgs []string, usage x509.ExtKeyUsage) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
}

// ServingCommonName is the subject of every kubestore's serving
// certificate. The CSR signer issues server certificates only to
// system:node:<name> (kubelet-serving), so a joiner that requires this
// subject talks to a member, never to a kubelet of the site.
const ServingCommonName = "kubestore"

func (p *PKI) servingTemplate() *x509.Certificate {
	t := p.leafTemplate(ServingCommonName, nil, x509.ExtKeyUsageServerAuth)
	addHosts(t, p.hosts)
	return t
}

// addHosts makes t cover hosts: IP addresses and DNS names.
func addHosts(t *x509.Certificate, hosts []string) {
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			t.IPAddresses = append(t.IPAddresses, ip)
		} else {
			t.DNSNames = append(t.DNSNames, h)
		}
	}
}

func (p *PKI) adminTemplate() *x509.Certificate {
	return p.leafTemplate(AdminUser, []string{user.SystemPrivilegedGroup}, x509.ExtKeyUsageClientAuth)
}

// KubeletClientUser is the identity kubestore connects to kubelets with
// (pods/log, exec, attach, portforward, nodes/proxy), as kubeadm names
// kube-apiserver's (--kubelet-client-certificate): a kubelet with webhook
// authorization asks kubestore whether it may, and system:masters may.
const KubeletClientUser = "kube-apiserver-kubelet-client"

func (p *PKI) kubeletClientTemplate() *x509.Certificate {
	return p.leafTemplate(KubeletClientUser, []string{user.SystemPrivilegedGroup}, x509.ExtKeyUsageClientAuth)
}

// KubeletClient is the client certificate kubestore presents to kubelets
// (pki/kubelet-client.crt), issued when missing, due, or of a CA no longer
// signing: ask for each connection.
func (p *PKI) KubeletClient() (certPEM, keyPEM []byte, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leaf("kubelet-client", p.kubeletClientTemplate)
}

// Renew replaces the serving certificate, and a site member's peer
// certificate, if due; the TLS listener and etcd pick the new ones up
// without a restart.
func (p *PKI) Renew() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	certPEM, keyPEM, err := p.leaf("serving", p.servingTemplate)
	if err != nil {
		return err
	}
	p.serving.set(certPEM, keyPEM)
	if p.peerHosts != nil {
		if _, _, err := p.leaf("peer", p.peerTemplate); err != nil {
			return err
		}
	}
	return nil
}

// WriteKubeconfig writes the admin kubeconfig to path for server (an
// https:// URL), with a fresh admin certificate when the stored one is due.
func (p *PKI) WriteKubeconfig(path, server string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	certPEM, keyPEM, err := p.leaf("admin", p.adminTemplate)
	if err != nil {
		return err
	}
	kc := clientcmdv1.Config{
		Kind:       "Config",
		APIVersion: "v1",
		Clusters: []clientcmdv1.NamedCluster{{Name: kubeconfigName, Cluster: clientcmdv1.Cluster{
			Server: server, CertificateAuthorityData: p.caPEM,
		}}},
		AuthInfos: []clientcmdv1.NamedAuthInfo{{Name: AdminUser, AuthInfo: clientcmdv1.AuthInfo{
			ClientCertificateData: certPEM, ClientKeyData: keyPEM,
		}}},
		Contexts: []clientcmdv1.NamedContext{{Name: kubeconfigName, Context: clientcmdv1.Context{
			Cluster: kubeconfigName, AuthInfo: AdminUser,
		}}},
		CurrentContext: kubeconfigName,
	}
	data, err := yaml.Marshal(kc)
	if err != nil {
		return err
	}
	return datadir.WriteFileAtomic(path, data)
}

// certKeyProvider is a dynamiccertificates.CertKeyContentProvider whose
// content can be replaced at run time.
type certKeyProvider struct {
	name      string
	mu        sync.Mutex
	cert, key []byte
	listeners []dynamiccertificates.Listener
}

var _ dynamiccertificates.CertKeyContentProvider = (*certKeyProvider)(nil)

func (c *certKeyProvider) Name() string { return c.name }

func (c *certKeyProvider) CurrentCertKeyContent() ([]byte, []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert, c.key
}

func (c *certKeyProvider) AddListener(l dynamiccertificates.Listener) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, l)
}

func (c *certKeyProvider) set(cert, key []byte) {
	c.mu.Lock()
	changed := !bytes.Equal(cert, c.cert)
	c.cert, c.key = cert, key
	listeners := slices.Clone(c.listeners)
	c.mu.Unlock()
	if changed {
		for _, l := range listeners {
			l.Enqueue()
		}
	}
}

// caProvider is a dynamiccertificates.CAContentProvider whose bundle a
// rotation replaces.
type caProvider struct {
	mu        sync.Mutex
	bundle    []byte
	opts      x509.VerifyOptions
	listeners []dynamiccertificates.Listener
	// signing is the subject key id of the CA that signs; clients are the
	// users whose client certificates another CA signed, by last use.
	signing []byte
	clients map[string]time.Time
	// seen has a value once clients changed (PreviousCAClientsSeen).
	seen chan struct{}
}

var _ dynamiccertificates.CAContentProvider = (*caProvider)(nil)

func (c *caProvider) Name() string { return "client-ca" }

func (c *caProvider) CurrentCABundleContent() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bundle
}

// VerifyOptions are upstream's for a client CA bundle
// (dynamiccertificates' newCABundleAndVerifier).
func (c *caProvider) VerifyOptions() (x509.VerifyOptions, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opts, c.opts.Roots != nil
}

func (c *caProvider) AddListener(l dynamiccertificates.Listener) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, l)
}

// observe notes that user authenticated with the client certificate leaf.
func (c *caProvider) observe(leaf *x509.Certificate, user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if bytes.Equal(leaf.AuthorityKeyId, c.signing) {
		return
	}
	if c.clients == nil {
		c.clients = map[string]time.Time{}
	}
	// To the minute: a member records the clients when they change
	// (carotation.Server), so at most once a minute while they are seen.
	if at := time.Now().UTC().Truncate(time.Minute); !c.clients[user].Equal(at) {
		c.clients[user] = at
		select {
		case c.seen <- struct{}{}:
		default:
		}
	}
}

// remember merges clients a record kept (a restart during the rotation)
// into those seen since.
func (c *caProvider) remember(clients map[string]time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for user, at := range clients {
		if c.clients == nil {
			c.clients = map[string]time.Time{}
		}
		if at.After(c.clients[user]) {
			c.clients[user] = at
		}
	}
}

func (c *caProvider) previousClients() map[string]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.clients)
}

func (c *caProvider) set(bundle, signing []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return errors.New("the CA bundle holds no certificate")
	}
	c.mu.Lock()
	if !bytes.Equal(signing, c.signing) {
		c.clients = nil
	}
	c.signing = signing
	changed := !bytes.Equal(bundle, c.bundle)
	c.bundle = slices.Clone(bundle)
	c.opts = x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	listeners := slices.Clone(c.listeners)
	c.mu.Unlock()
	if changed {
		for _, l := range listeners {
			l.Enqueue()
		}
	}
	return nil
}

// pemBlock is the DER of the first PEM block of data, nil without one.
func pemBlock(data []byte) []byte {
	if b, _ := pem.Decode(data); b != nil {
		return b.Bytes
	}
	return nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err)
	}
	return n
}

// readPair reads the certificates of certFile (PEM) and the key of
// keyFile: the certificate is the one that matches the key, returned
// first, before the others (a leaf's chain, or the CAs of a bundle; in a
// CA bundle, wherever a rotation cut short left the signing CA).
func readPair(certFile, keyFile string) ([]byte, *x509.Certificate, crypto.Signer, error) {
	bundle, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, nil, err
	}
	keyData, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := parseKey(keyData)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	ders := pemCerts(bundle)
	for i, der := range ders {
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", certFile, err)
		}
		pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
		if !ok || !pub.Equal(key.Public()) {
			continue
		}
		out := certPEM(der)
		for j, other := range ders {
			if j != i {
				out = append(out, certPEM(other)...)
			}
		}
		return out, cert, key, nil
	}
	return nil, nil, nil, fmt.Errorf("%s holds no certificate of the key in %s", certFile, keyFile)
}

func parseKey(data []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("no PEM key")
	}
	var key any
	var err error
	switch b.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	}
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported key type %T", key)
	}
	return signer, nil
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func writePair(certFile, keyFile string, certPEM []byte, key crypto.Signer) error {
	keyPEM, err := encodeKey(key)
	if err != nil {
		return err
	}
	// The key first: a certificate without its key is never left behind.
	if err := datadir.WriteFileAtomic(keyFile, keyPEM); err != nil {
		return err
	}
	return datadir.WriteFileAtomic(certFile, certPEM)
}
