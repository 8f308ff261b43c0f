package access

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
)

// joinSecretFile holds the site's join secret: the part of the join token
// after the CA's hash.
const joinSecretFile = "join-secret"

// SiteSecrets are what every member of a site shares, and a joining member
// receives: the CA with its key (each member issues its own serving, peer
// and admin certificates, and the CSR signer of every member signs for the
// site), the generated encryption configuration (a Secret one member stored
// must decrypt on every other) and the join secret (any member admits a
// joiner).
type SiteSecrets struct {
	CACert []byte `json:"caCert"`
	CAKey  []byte `json:"caKey"`
	// CACross is the CA certified by the previous one, after a rotation.
	CACross          []byte `json:"caCross,omitempty"`
	EncryptionConfig []byte `json:"encryptionConfig,omitempty"`
	JoinSecret       string `json:"joinSecret"`
}

// ReadSiteSecrets reads the site's secrets from dir's pki, creating the
// join secret on a member that founds a site.
func ReadSiteSecrets(dir datadir.Dir) (SiteSecrets, error) {
	var s SiteSecrets
	var err error
	pki := dir.PKI()
	if s.CACert, err = os.ReadFile(filepath.Join(pki, "ca.crt")); err != nil {
		return s, err
	}
	if s.CAKey, err = os.ReadFile(filepath.Join(pki, "ca.key")); err != nil {
		return s, err
	}
	if s.EncryptionConfig, err = os.ReadFile(filepath.Join(pki, EncryptionConfigFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return s, err
	}
	if s.CACross, err = os.ReadFile(filepath.Join(pki, crossFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return s, err
	}
	s.JoinSecret, err = joinSecret(dir)
	return s, err
}

// WriteSiteSecrets installs the secrets a joining member received, in place
// of its own: leaf certificates the previous CA signed are issued anew at
// the next LoadPKI.
func WriteSiteSecrets(dir datadir.Dir, s SiteSecrets) error {
	pki := dir.PKI()
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	if _, err := x509.ParseCertificate(pemBlock(s.CACert)); err != nil {
		return fmt.Errorf("the site's CA certificate: %w", err)
	}
	files := []struct {
		name string
		data []byte
	}{
		// The key first: a certificate without its key is never left.
		{"ca.key", s.CAKey},
		{crossFile, s.CACross},
		{"ca.crt", s.CACert},
		{EncryptionConfigFile, s.EncryptionConfig},
		{joinSecretFile, []byte(s.JoinSecret + "\n")},
	}
	for _, f := range files {
		if len(f.data) == 0 {
			continue
		}
		if err := datadir.WriteFileAtomic(filepath.Join(pki, f.name), f.data); err != nil {
			return err
		}
	}
	return nil
}

// JoinToken is the join token of dir's site (config.FormatJoinToken).
func JoinToken(dir datadir.Dir) (string, error) {
	s, err := ReadSiteSecrets(dir)
	if err != nil {
		return "", err
	}
	return config.FormatJoinToken(pemBlock(s.CACert), s.JoinSecret), nil
}

// joinSecret reads the join secret of dir, creating it on first use.
func joinSecret(dir datadir.Dir) (string, error) {
	path := filepath.Join(dir.PKI(), joinSecretFile)
	data, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(data)), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	secret, err := newJoinSecret()
	if err != nil {
		return "", err
	}
	return secret, datadir.WriteFileAtomic(path, []byte(secret+"\n"))
}

// newJoinSecret is 24 random bytes, as text.
func newJoinSecret() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Peer issues, or keeps, this member's certificate for its site's peer
// traffic: server and client authentication (etcd's peers dial each other
// both ways) for its name and advertised address, signed by the site's CA,
// with the members' own subject (config.SiteMemberCommonName), which the
// peer port requires. A peer certificate of an earlier release (its
// subject the member's name) is issued anew. Renew renews it from then on;
// etcd reads the files at every handshake, so a renewed certificate needs
// no restart.
func (p *PKI) Peer(site config.Site) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.peerHosts = []string{site.Name(), site.PeerAdvertiseAddress}
	_, _, err := p.leaf("peer", p.peerTemplate)
	return err
}

func (p *PKI) peerTemplate() *x509.Certificate {
	t := p.leafTemplate(config.SiteMemberCommonName, nil, x509.ExtKeyUsageServerAuth)
	t.ExtKeyUsage = append(t.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	addHosts(t, p.peerHosts)
	return t
}
